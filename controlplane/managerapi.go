// The Manager protocol (docs/protocol.md): heartbeats and command acknowledgements, each
// authenticated by the environment's connect token.

package controlplane

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/nexo-io/nexo-edge/contract/connecttoken"
	"github.com/nexo-io/nexo-edge/contract/protocol"
	"github.com/nexo-io/nexo-edge/controlplane/storage"
)

// environment authenticates a Manager by its connect token (compared by hash; never logged).
func (s *Server) environment(r *http.Request) (storage.Environment, error) {
	tok := bearer(r)
	if _, err := connecttoken.Parse(tok); err != nil {
		return storage.Environment{}, fail(http.StatusUnauthorized, "missing or malformed connect token (Authorization: Bearer TOKEN)")
	}
	env, rotatedAt, err := s.cfg.Store.Authenticate(r.Context(), connecttoken.Hash(tok), s.now())
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return env, fail(http.StatusUnauthorized, "unknown connect token")
	case errors.Is(err, storage.ErrTokenRotated):
		return env, fail(http.StatusUnauthorized, "this connect token was rotated at %s and its grace period is over; install the new token: nexoctl install --token-file NEW", rotatedAt.UTC().Format(time.RFC3339))
	case err != nil:
		return env, err
	}
	return env, nil
}

// managerEntry makes env's Manager the actor of the request's audit records, in the history of
// env's tenant (so a tenant sees the deliveries and acknowledgements of its commands).
func (s *Server) managerEntry(r *http.Request, env storage.Environment) (*auditEntry, error) {
	tenant, err := s.cfg.Store.EnvironmentTenant(r.Context(), env.ID)
	if err != nil {
		return nil, err
	}
	e := auditOf(r)
	e.actor, e.role, e.tenant, e.target = managerActor(env.ID), "manager", tenant, env.ID
	return e, nil
}

func (s *Server) heartbeat(w http.ResponseWriter, r *http.Request) error {
	env, err := s.environment(r)
	if err != nil {
		return err
	}
	var hb protocol.Heartbeat
	if err := decode(r, &hb, managerBody); err != nil {
		return err
	}
	if hb.ProtocolVersion != protocol.Version {
		return fail(http.StatusBadRequest, "protocol version %q is not supported; this Control Plane speaks %s", truncate(hb.ProtocolVersion, 40), protocol.Version)
	}
	if hb.ClusterID == "" {
		return fail(http.StatusBadRequest, "clusterId (the kube-system namespace UID) is required")
	}
	bound, err := s.cfg.Store.BindCluster(r.Context(), env.ID, hb.ClusterID)
	if err != nil {
		return err
	}
	if !bound {
		s.log().Warn("connect token used from another cluster", "environment", env.ID)
		return fail(http.StatusForbidden, "environment %s is bound to another cluster; issue a new connect token for this cluster", env.ID)
	}
	// The proxies go to the inventory table, one row each; the heartbeat record keeps the rest.
	var inventoryDigest string
	var resync bool
	if slices.Contains(hb.Capabilities, protocol.CapInventoryDelta) {
		inventoryDigest, resync, err = s.cfg.Store.ApplyInventory(r.Context(), env.ID, hb.InventoryBase, hb.InventoryDigest, hb.Changed, hb.Removed)
	} else {
		err = s.cfg.Store.ReplaceInventory(r.Context(), env.ID, hb.Deployments)
	}
	if err != nil {
		return fmt.Errorf("inventory of %s: %w", env.ID, err)
	}
	// A steady heartbeat (a delta that changes nothing) changes no stage's run.
	moved := !slices.Contains(hb.Capabilities, protocol.CapInventoryDelta) || len(hb.Changed) > 0 || len(hb.Removed) > 0 || resync
	hb.Deployments, hb.Changed, hb.Removed = nil, nil, nil
	body, _ := json.Marshal(hb)
	if err := s.cfg.Store.RecordHeartbeat(r.Context(), env.ID, string(body), hb.Capabilities); err != nil {
		return err
	}
	if moved {
		if err := s.observeRuns(r.Context(), env.ID); err != nil {
			return fmt.Errorf("stage runs of %s: %w", env.ID, err)
		}
	}
	records, err := s.cfg.Store.Deliver(r.Context(), env.ID)
	if err != nil {
		return err
	}
	keys, err := s.advertisedKeys(r.Context())
	if err != nil {
		return fmt.Errorf("signing keys: %w", err)
	}
	resp := protocol.HeartbeatResponse{NextHeartbeatSeconds: int(s.nextHeartbeat().Seconds()), Commands: []protocol.Command{}, SigningKeys: keys,
		InventoryDigest: inventoryDigest, InventoryResync: resync, Capabilities: []string{protocol.CapProxyStatus, protocol.CapKindSupport}}
	var entry *auditEntry
	if len(records) > 0 {
		if entry, err = s.managerEntry(r, env); err != nil {
			return err
		}
	}
	for _, rec := range records {
		var c protocol.Command
		if err := json.Unmarshal([]byte(rec.Body), &c); err != nil {
			return fmt.Errorf("stored command %s: %w", rec.ID, err)
		}
		resp.Commands = append(resp.Commands, c)
		entry.commandID = rec.ID
		// The delivery and its record commit together, in the request's transaction.
		if _, err := s.cfg.Store.Audit(r.Context(), entry.record("command.deliver", storage.Allowed, fmt.Sprintf("delivery %d", rec.Deliveries+1))); err != nil {
			return err
		}
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}

func (s *Server) nextHeartbeat() time.Duration {
	if s.cfg.NextHeartbeat <= 0 {
		return 30 * time.Second
	}
	return s.cfg.NextHeartbeat
}

// ack is POST /v1/commands/{id}/ack: the outcome and its audit record commit together
// (endpoint records it as command.ack; a refusal, such as another environment's command, too).
func (s *Server) ack(w http.ResponseWriter, r *http.Request) error {
	env, err := s.environment(r)
	if err != nil {
		return err
	}
	if err := validPath(r); err != nil {
		return err
	}
	e, err := s.managerEntry(r, env)
	if err != nil {
		return err
	}
	var a protocol.Ack
	if err := decode(r, &a, managerBody); err != nil {
		return err
	}
	if a.Status != protocol.Applied && a.Status != protocol.Failed {
		return fail(http.StatusBadRequest, "ack needs status %q or %q", protocol.Applied, protocol.Failed)
	}
	id := r.PathValue("id")
	switch err := s.cfg.Store.Ack(r.Context(), env.ID, id, storage.CommandState(a.Status), a.Message, deployedObjects); {
	case errors.Is(err, storage.ErrNotFound):
		return fail(http.StatusNotFound, "no command %s for this environment", id)
	case err != nil:
		return err
	}
	if a.Preview != nil {
		// A preview's answer, or the proxies a deploy was predicted to move (bounded by the
		// Manager to protocol.MaxPreviewBytes; the body limit holds it).
		body, err := json.Marshal(a.Preview)
		if err != nil {
			return err
		}
		if err := s.cfg.Store.SetCommandResult(r.Context(), id, string(body)); err != nil {
			return err
		}
	}
	if a.Status == protocol.Applied {
		// An applied command may complete a stage's run (its proxies already report the
		// predicted revision): the heartbeats that follow may change nothing.
		if err := s.observeRuns(r.Context(), env.ID); err != nil {
			return fmt.Errorf("stage runs of %s: %w", env.ID, err)
		}
	}
	e.commandID, e.reason = id, a.Status
	if a.Status == protocol.Failed && a.Message != "" {
		e.reason += ": " + a.Message
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// managerActor is how an environment's Manager appears in the audit history.
func managerActor(envID string) string { return "manager:" + envID }

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
