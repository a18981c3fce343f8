// The Manager protocol (docs/protocol.md): heartbeats and command acknowledgements, each
// authenticated by the environment's connect token.

package controlplane

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/nexo-io/nexo-edge/contract/connecttoken"
	"github.com/nexo-io/nexo-edge/contract/protocol"
)

// environment authenticates a Manager by its connect token (compared by hash; never logged).
func (s *Server) environment(w http.ResponseWriter, r *http.Request) (Environment, bool) {
	tok := bearer(r)
	if _, err := connecttoken.Parse(tok); err != nil {
		writeError(w, http.StatusUnauthorized, "missing or malformed connect token")
		return Environment{}, false
	}
	env, rotatedAt, err := s.Store.Authenticate(r.Context(), connecttoken.Hash(tok), s.now())
	if errors.Is(err, ErrNotFound) {
		writeError(w, http.StatusUnauthorized, "unknown connect token")
		return env, false
	}
	if errors.Is(err, ErrTokenRotated) {
		writeError(w, http.StatusUnauthorized, "this connect token was rotated at %s and its grace period is over; install the new token: nexoctl install --token-file NEW", rotatedAt.UTC().Format(time.RFC3339))
		return env, false
	}
	if err != nil {
		writeError(w, http.StatusInternalServerError, "storage error")
		s.log().Error("token lookup", "error", err)
		return env, false
	}
	return env, true
}

func (s *Server) heartbeat(w http.ResponseWriter, r *http.Request) {
	env, ok := s.environment(w, r)
	if !ok {
		return
	}
	var hb protocol.Heartbeat
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&hb); err != nil {
		writeError(w, http.StatusBadRequest, "heartbeat is not valid JSON: %v", err)
		return
	}
	if hb.ProtocolVersion != protocol.Version {
		writeError(w, http.StatusBadRequest, "protocol version %q is not supported; this Control Plane speaks %s", hb.ProtocolVersion, protocol.Version)
		return
	}
	if hb.ClusterID == "" {
		writeError(w, http.StatusBadRequest, "clusterId (the kube-system namespace UID) is required")
		return
	}
	bound, err := s.Store.BindCluster(r.Context(), env.ID, hb.ClusterID)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "storage error")
		return
	}
	if !bound {
		s.log().Warn("connect token used from another cluster", "environment", env.ID, "cluster", hb.ClusterID)
		writeError(w, http.StatusForbidden, "environment %s is bound to another cluster; issue a new connect token for this cluster", env.ID)
		return
	}
	// The proxies go to the inventory table, one row each; the heartbeat record keeps the rest.
	var inventoryDigest string
	var resync bool
	if slices.Contains(hb.Capabilities, protocol.CapInventoryDelta) {
		inventoryDigest, resync, err = s.Store.ApplyInventory(r.Context(), env.ID, hb.InventoryBase, hb.InventoryDigest, hb.Changed, hb.Removed)
	} else {
		err = s.Store.ReplaceInventory(r.Context(), env.ID, hb.Deployments)
	}
	if err != nil {
		writeError(w, http.StatusInternalServerError, "storage error")
		s.log().Error("inventory", "environment", env.ID, "error", err)
		return
	}
	hb.Deployments, hb.Changed, hb.Removed = nil, nil, nil
	body, _ := json.Marshal(hb)
	if err := s.Store.RecordHeartbeat(r.Context(), env.ID, string(body)); err != nil {
		writeError(w, http.StatusInternalServerError, "storage error")
		return
	}
	records, err := s.Store.Deliver(r.Context(), env.ID)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "storage error")
		return
	}
	keys, err := s.advertisedKeys(r.Context())
	if err != nil {
		writeError(w, http.StatusInternalServerError, "signing keys unavailable")
		s.log().Error("signing keys", "error", err)
		return
	}
	resp := protocol.HeartbeatResponse{NextHeartbeatSeconds: int(s.nextHeartbeat().Seconds()), Commands: []protocol.Command{}, SigningKeys: keys,
		InventoryDigest: inventoryDigest, InventoryResync: resync}
	for _, rec := range records {
		var c protocol.Command
		if err := json.Unmarshal([]byte(rec.Body), &c); err == nil {
			resp.Commands = append(resp.Commands, c)
			s.audit(r.Context(), AuditRecord{Actor: managerActor(env.ID), Role: "manager", Action: "command.deliver", Target: env.ID,
				Decision: Allowed, Reason: fmt.Sprintf("delivery %d", rec.Deliveries+1), CommandID: rec.ID})
		}
	}
	writeJSON(w, http.StatusOK, resp)
}

func (s *Server) nextHeartbeat() time.Duration {
	if s.NextHeartbeat <= 0 {
		return 30 * time.Second
	}
	return s.NextHeartbeat
}

func (s *Server) ack(w http.ResponseWriter, r *http.Request) {
	env, ok := s.environment(w, r)
	if !ok {
		return
	}
	var a protocol.Ack
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&a); err != nil || (a.Status != protocol.Applied && a.Status != protocol.Failed) {
		writeError(w, http.StatusBadRequest, "ack needs status %q or %q", protocol.Applied, protocol.Failed)
		return
	}
	record := AuditRecord{Actor: managerActor(env.ID), Role: "manager", Action: "command.ack", Target: env.ID, Decision: Allowed, Reason: a.Status, CommandID: r.PathValue("id")}
	if a.Status == protocol.Failed && a.Message != "" {
		record.Reason += ": " + truncate(a.Message, 512)
	}
	switch err := s.Store.Ack(r.Context(), env.ID, r.PathValue("id"), a.Status, a.Message, deployedObjects); {
	case errors.Is(err, ErrNotFound):
		writeError(w, http.StatusNotFound, "no command %s for this environment", r.PathValue("id"))
		record.Decision, record.Reason = Refused, "no such command for this environment"
	case err != nil:
		writeError(w, http.StatusInternalServerError, "storage error")
		return
	default:
		w.WriteHeader(http.StatusNoContent)
	}
	s.audit(r.Context(), record)
}

// managerActor is how an environment's Manager appears in the audit history.
func managerActor(envID string) string { return "manager:" + envID }

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
