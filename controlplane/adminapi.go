// The admin API (docs/protocol.md, "Admin API"): environments, their tokens and health, and
// the command queue.

package controlplane

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/nexo-io/nexo-edge/contract/connecttoken"
	"github.com/nexo-io/nexo-edge/contract/protocol"
	"github.com/nexo-io/nexo-edge/controlplane/storage"
)

// adminActor is who the admin token acts as in the audit history.
const adminActor, adminRole = "admin", "admin"

// NewEnvironment is the admin API's answer to a registration: the token is shown this once.
type NewEnvironment struct {
	storage.Environment
	Token string `json:"token"`
}

func randomID(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// pathEnvironment resolves the path's environment (404 otherwise) and makes it the audit target,
// in its tenant's history.
func (s *Server) pathEnvironment(r *http.Request) (storage.Environment, error) {
	env, err := s.Store.Environment(r.Context(), r.PathValue("env"))
	if errors.Is(err, storage.ErrNotFound) {
		return env, fail(http.StatusNotFound, "no environment %s", r.PathValue("env"))
	} else if err != nil {
		return env, err
	}
	tenant, err := s.Store.EnvironmentTenant(r.Context(), env.ID)
	if err != nil {
		return env, err
	}
	auditOf(r).tenant, auditOf(r).target = tenant, env.ID
	return env, nil
}

// createEnvironment is POST /admin/environments {"name"}: an environment outside any tenant.
func (s *Server) createEnvironment(w http.ResponseWriter, r *http.Request) error {
	name, err := decodeName(r, "environment", validDisplayName)
	if err != nil {
		return err
	}
	env, token, err := s.registerEnvironment(r.Context(), name)
	if err != nil {
		return err
	}
	auditOf(r).target = env.ID
	writeJSON(w, http.StatusCreated, NewEnvironment{Environment: env, Token: token})
	return nil
}

// DefaultTokenGrace is how long a rotated connect token stays valid if the Manager never uses
// the new one.
const DefaultTokenGrace = 24 * time.Hour

// MaxTokenGrace bounds how long a rotated connect token may stay valid.
const MaxTokenGrace = 7 * 24 * time.Hour

// RotatedToken is the admin API's answer to a token rotation: the new token is shown this once.
type RotatedToken struct {
	Token string `json:"token"`
	// OldValidUntil is when the previous token stops working at the latest; it stops earlier,
	// as soon as the Manager heartbeats with the new one.
	OldValidUntil time.Time `json:"oldValidUntil"`
}

// rotateToken is POST /admin/environments/{env}/token {"graceSeconds": n} (body optional).
func (s *Server) rotateToken(w http.ResponseWriter, r *http.Request) error {
	env, err := s.pathEnvironment(r)
	if err != nil {
		return err
	}
	return s.rotate(w, r, env)
}

// rotate issues a new connect token for env: the current one stays valid until the Manager
// uses the new one, or for the grace the body asks (DefaultTokenGrace when none).
func (s *Server) rotate(w http.ResponseWriter, r *http.Request, env storage.Environment) error {
	var req struct {
		GraceSeconds int64 `json:"graceSeconds"`
	}
	if r.ContentLength != 0 {
		if err := decode(r, &req, smallBody); err != nil {
			return err
		}
	}
	if req.GraceSeconds < 0 || req.GraceSeconds > int64(MaxTokenGrace.Seconds()) {
		return fail(http.StatusBadRequest, "graceSeconds must be between 0 and %d (7 days); 0 or none for the default (24 hours)", int64(MaxTokenGrace.Seconds()))
	}
	grace := DefaultTokenGrace
	if req.GraceSeconds > 0 {
		grace = time.Duration(req.GraceSeconds) * time.Second
	}
	token, err := connecttoken.New(env.ID)
	if err != nil {
		return err
	}
	until := s.now().Add(grace)
	if err := s.Store.RotateToken(r.Context(), env.ID, connecttoken.Hash(token), until); err != nil {
		return err
	}
	s.log().Info("connect token rotated", "environment", env.ID, "oldValidUntil", until.UTC().Format(time.RFC3339))
	writeJSON(w, http.StatusOK, RotatedToken{Token: token, OldValidUntil: until})
	return nil
}

// EnvironmentView is the admin API's view of an environment: inventory and command history.
type EnvironmentView struct {
	storage.Environment
	Health
	Inventory *protocol.Heartbeat `json:"inventory,omitempty"`
	// InventoryComplete is false while a Manager's report of its proxies, spread over several
	// heartbeats (a first report, a resync), is still arriving: Inventory.Deployments is partial.
	InventoryComplete bool          `json:"inventoryComplete"`
	Commands          []CommandView `json:"commands"`
}

// Heartbeat states of an environment, by the age of its last heartbeat against the interval the
// Control Plane asks for (NextHeartbeat, 30 s by default).
const (
	// StateNever: no heartbeat yet (the Manager is not installed, or cannot reach us).
	StateNever = "never"
	// StateHealthy: the last heartbeat is at most 3 intervals old.
	StateHealthy = "healthy"
	// StateStale: 3 to 10 intervals: heartbeats are being missed (network, Control Plane load).
	StateStale = "stale"
	// StateLost: more than 10 intervals: the Manager is gone or cut off; commands are not delivered.
	StateLost = "lost"
)

// Health is the heartbeat state of an environment.
type Health struct {
	LastHeartbeat *time.Time `json:"lastHeartbeat,omitempty"`
	// AgeSeconds is the age of the last heartbeat when the view was made.
	AgeSeconds *int64 `json:"heartbeatAgeSeconds,omitempty"`
	State      string `json:"state"`
}

func (s *Server) health(ctx context.Context, envID string, now time.Time) (Health, string, error) {
	at, body, err := s.Store.LastHeartbeat(ctx, envID)
	if err != nil {
		return Health{}, "", err
	}
	if body == "" {
		return Health{State: StateNever}, "", nil
	}
	age := now.Sub(at)
	secs := int64(age.Seconds())
	h := Health{LastHeartbeat: &at, AgeSeconds: &secs, State: StateHealthy}
	switch interval := s.nextHeartbeat(); {
	case age > 10*interval:
		h.State = StateLost
	case age > 3*interval:
		h.State = StateStale
	}
	return h, body, nil
}

// EnvironmentSummary is one row of the environment listing.
type EnvironmentSummary struct {
	storage.Environment
	Health
}

func (s *Server) listEnvironments(w http.ResponseWriter, r *http.Request) error {
	envs, err := s.Store.Environments(r.Context())
	if err != nil {
		return err
	}
	out := []EnvironmentSummary{}
	now := s.now()
	for _, e := range envs {
		h, _, err := s.health(r.Context(), e.ID, now)
		if err != nil {
			return err
		}
		out = append(out, EnvironmentSummary{Environment: e, Health: h})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *Server) showEnvironment(w http.ResponseWriter, r *http.Request) error {
	env, err := s.pathEnvironment(r)
	if err != nil {
		return err
	}
	view := EnvironmentView{Environment: env}
	h, body, err := s.health(r.Context(), env.ID, s.now())
	if err != nil {
		return err
	}
	view.Health = h
	if body != "" {
		var hb protocol.Heartbeat
		if err := json.Unmarshal([]byte(body), &hb); err != nil {
			return fmt.Errorf("stored heartbeat of %s: %w", env.ID, err)
		}
		hb.Deployments, view.InventoryComplete, err = s.Store.Inventory(r.Context(), env.ID)
		if err != nil {
			return err
		}
		view.Inventory = &hb
	}
	cmds, err := s.Store.Commands(r.Context(), env.ID)
	if err != nil {
		return err
	}
	var deployed []protocol.Deployment
	if view.Inventory != nil {
		deployed = view.Inventory.Deployments
	}
	if view.Commands, err = s.commandViews(r.Context(), env.ID, cmds, deployed); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, view)
	return nil
}

// enqueue is POST /admin/environments/{env}/commands: the admin token's command, which skips
// the stage checks (not the Manager's, nor the cluster's).
func (s *Server) enqueue(w http.ResponseWriter, r *http.Request) error {
	env, err := s.pathEnvironment(r)
	if err != nil {
		return err
	}
	var c protocol.Command
	if err := decode(r, &c, manifestBody); err != nil {
		return err
	}
	return s.submit(w, r, commandRequest{env: env, cmd: c})
}
