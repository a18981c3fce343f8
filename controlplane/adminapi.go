// The admin API (docs/protocol.md, "Admin API"): environments, their tokens and health, and
// the command queue.

package controlplane

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/nexo-io/nexo-edge/contract/connecttoken"
	"github.com/nexo-io/nexo-edge/contract/protocol"
	"github.com/nexo-io/nexo-edge/contract/signature"
)

// adminActor is who the admin token acts as in the audit history.
const adminActor, adminRole = "admin", "admin"

// admin guards an admin route with the admin token, and audits it as action: a request without
// the token is recorded as refused, by an unknown actor.
func (s *Server) admin(action string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.AdminToken == "" || subtle.ConstantTimeCompare([]byte(bearer(r)), []byte(s.AdminToken)) != 1 {
			s.audited(action, "unknown", "none", func(w http.ResponseWriter, _ *http.Request) {
				writeError(w, http.StatusUnauthorized, "admin token required")
			})(w, r)
			return
		}
		s.audited(action, adminActor, adminRole, h)(w, r)
	}
}

// NewEnvironment is the admin API's answer to a registration: the token is shown this once.
type NewEnvironment struct {
	Environment
	Token string `json:"token"`
}

func randomID(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (s *Server) createEnvironment(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Name string `json:"name"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(&req); err != nil || strings.TrimSpace(req.Name) == "" {
		writeError(w, http.StatusBadRequest, "a name is required")
		return
	}
	env, token, err := s.registerEnvironment(r.Context(), req.Name)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "cannot register the environment")
		s.log().Error("register environment", "error", err)
		return
	}
	auditOf(r).target = env.ID
	writeJSON(w, http.StatusCreated, NewEnvironment{Environment: env, Token: token})
}

// DefaultTokenGrace is how long a rotated connect token stays valid if the Manager never uses
// the new one.
const DefaultTokenGrace = 24 * time.Hour

// RotatedToken is the admin API's answer to a token rotation: the new token is shown this once.
type RotatedToken struct {
	Token string `json:"token"`
	// OldValidUntil is when the previous token stops working at the latest; it stops earlier,
	// as soon as the Manager heartbeats with the new one.
	OldValidUntil time.Time `json:"oldValidUntil"`
}

// rotateToken issues a new connect token for an environment (body: {"graceSeconds": n}, optional).
func (s *Server) rotateToken(w http.ResponseWriter, r *http.Request) {
	var req struct {
		GraceSeconds int64 `json:"graceSeconds"`
	}
	if r.ContentLength != 0 {
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<10)).Decode(&req); err != nil || req.GraceSeconds < 0 {
			writeError(w, http.StatusBadRequest, "body is {\"graceSeconds\": n} with n >= 0, or empty")
			return
		}
	}
	env, err := s.Store.Environment(r.Context(), r.PathValue("env"))
	if errors.Is(err, ErrNotFound) {
		writeError(w, http.StatusNotFound, "no environment %s", r.PathValue("env"))
		return
	}
	grace := DefaultTokenGrace
	if req.GraceSeconds > 0 {
		grace = time.Duration(req.GraceSeconds) * time.Second
	}
	token, err := connecttoken.New(env.ID)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "cannot issue a token")
		return
	}
	until := s.now().Add(grace)
	if err := s.Store.RotateToken(r.Context(), env.ID, connecttoken.Hash(token), until); err != nil {
		writeError(w, http.StatusInternalServerError, "storage error")
		return
	}
	s.log().Info("connect token rotated", "environment", env.ID, "oldValidUntil", until.UTC().Format(time.RFC3339))
	writeJSON(w, http.StatusOK, RotatedToken{Token: token, OldValidUntil: until})
}

// EnvironmentView is the admin API's view of an environment: inventory and command history.
type EnvironmentView struct {
	Environment
	Health
	Inventory *protocol.Heartbeat `json:"inventory,omitempty"`
	// InventoryComplete is false while a Manager's report of its proxies, spread over several
	// heartbeats (a first report, a resync), is still arriving: Inventory.Deployments is partial.
	InventoryComplete bool            `json:"inventoryComplete"`
	Commands          []CommandRecord `json:"commands"`
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

func (s *Server) health(ctx context.Context, envID string, now time.Time) (Health, string) {
	at, body, err := s.Store.LastHeartbeat(ctx, envID)
	if err != nil || body == "" {
		return Health{State: StateNever}, ""
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
	return h, body
}

// EnvironmentSummary is one row of the environment listing.
type EnvironmentSummary struct {
	Environment
	Health
}

func (s *Server) listEnvironments(w http.ResponseWriter, r *http.Request) {
	envs, err := s.Store.Environments(r.Context())
	if err != nil {
		writeError(w, http.StatusInternalServerError, "storage error")
		return
	}
	out := []EnvironmentSummary{}
	now := s.now()
	for _, e := range envs {
		h, _ := s.health(r.Context(), e.ID, now)
		out = append(out, EnvironmentSummary{Environment: e, Health: h})
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) showEnvironment(w http.ResponseWriter, r *http.Request) {
	env, err := s.Store.Environment(r.Context(), r.PathValue("env"))
	if errors.Is(err, ErrNotFound) {
		writeError(w, http.StatusNotFound, "no environment %s", r.PathValue("env"))
		return
	}
	view := EnvironmentView{Environment: env}
	h, body := s.health(r.Context(), env.ID, s.now())
	view.Health = h
	if body != "" {
		var hb protocol.Heartbeat
		_ = json.Unmarshal([]byte(body), &hb)
		hb.Deployments, view.InventoryComplete, err = s.Store.Inventory(r.Context(), env.ID)
		if err != nil {
			writeError(w, http.StatusInternalServerError, "storage error")
			return
		}
		view.Inventory = &hb
	}
	view.Commands, _ = s.Store.Commands(r.Context(), env.ID)
	if view.Commands == nil {
		view.Commands = []CommandRecord{}
	}
	writeJSON(w, http.StatusOK, view)
}

// enqueue validates a command and queues it. Manifests are signed inside the queueing
// transaction, for this environment (the audience) at the command's sequence number (the
// revision), so a later command always carries a higher revision than an earlier one.
func (s *Server) enqueue(w http.ResponseWriter, r *http.Request) {
	env, err := s.Store.Environment(r.Context(), r.PathValue("env"))
	if errors.Is(err, ErrNotFound) {
		writeError(w, http.StatusNotFound, "no environment %s", r.PathValue("env"))
		return
	}
	var c protocol.Command
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 8<<20)).Decode(&c); err != nil {
		writeError(w, http.StatusBadRequest, "command is not valid JSON: %v", err)
		return
	}
	s.queue(w, r, env, c)
}

// queue prepares, signs and queues a command for env, and answers 201 {"id"}; a command the
// environment cannot take is a 400 with the reason.
func (s *Server) queue(w http.ResponseWriter, r *http.Request, env Environment, c protocol.Command) {
	if err := s.prepare(r.Context(), env.ID, &c); err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	c.ID = "cmd-" + randomID(8)
	key, err := s.activeKey(r.Context())
	if err != nil {
		writeError(w, http.StatusInternalServerError, "no signing key")
		return
	}
	_, err = s.Store.Enqueue(r.Context(), env.ID, c.ID, c.Type, func(seq int64) (string, error) {
		for i, raw := range c.Manifests {
			signed, err := sign(key, raw, signature.Claims{Audience: env.ID, Revision: seq})
			if err != nil {
				return "", fmt.Errorf("manifest %d: %w", i, err)
			}
			c.Manifests[i] = signed
		}
		body, err := json.Marshal(c)
		return string(body), err
	})
	if err != nil {
		writeError(w, http.StatusInternalServerError, "cannot queue the command")
		s.log().Error("enqueue", "environment", env.ID, "error", err)
		return
	}
	auditOf(r).commandID = c.ID
	if c.Type == protocol.Uninstall {
		// The proxy leaves the deployed set now: a rollout queued after this never re-creates it.
		if err := s.Store.Forget(r.Context(), env.ID, "NexoProxy", c.Proxy.Namespace, c.Proxy.Name); err != nil {
			s.log().Error("forget uninstalled proxy", "environment", env.ID, "error", err)
		}
	}
	writeJSON(w, http.StatusCreated, map[string]string{"id": c.ID})
}
