// Environments (docs/protocol.md, "Admin API"; docs/controlplane.md, "Targeting"): the admin
// token's registration, listing, view, token rotation and health, and a tenant admin's
// environments, their labels and namespace targets.

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
	"github.com/nexo-io/nexo-edge/controlplane/authz"
	"github.com/nexo-io/nexo-edge/controlplane/storage"
	"github.com/nexo-io/nexo-edge/controlplane/targeting"
)

// createTenantEnvironment is POST /admin/tenants/{tenant}/environments {"name"}: an environment
// of the tenant, its connect token shown this once.
func (s *Server) createTenantEnvironment(w http.ResponseWriter, r *http.Request, _ authz.Caller) error {
	return s.createEnvironmentIn(w, r, r.PathValue("tenant"))
}

// createEnvironmentIn registers the body's {"name"} as an environment of tenant ("" for none) and
// answers 201 with its connect token, shown this once.
func (s *Server) createEnvironmentIn(w http.ResponseWriter, r *http.Request, tenant string) error {
	name, err := decodeName(r, "environment", validDisplayName)
	if err != nil {
		return err
	}
	env, token, err := s.registerEnvironment(r.Context(), name)
	if err != nil {
		return err
	}
	if tenant != "" {
		if err := s.cfg.Store.AssignEnvironment(r.Context(), env.ID, tenant); err != nil {
			return err
		}
	}
	auditOf(r).target = env.ID
	writeJSON(w, http.StatusCreated, NewEnvironment{Environment: env, Token: token})
	return nil
}

// tenantEnvironment resolves the path's environment in the path's tenant: another tenant's
// environment is answered as unknown (404).
func (s *Server) tenantEnvironment(r *http.Request) (string, error) {
	env, tenant := r.PathValue("env"), r.PathValue("tenant")
	owner, err := s.cfg.Store.EnvironmentTenant(r.Context(), env)
	if err != nil {
		return "", err
	}
	if owner != tenant {
		return "", fail(http.StatusNotFound, "no environment %s in tenant %s", env, tenant)
	}
	auditOf(r).target = env
	return env, nil
}

// rotateTenantToken is POST /admin/tenants/{tenant}/environments/{env}/token {"graceSeconds"}
// (body optional): the tenant admin's connect-token rotation, with the same grace as the admin
// token's (rotate, above).
func (s *Server) rotateTenantToken(w http.ResponseWriter, r *http.Request, _ authz.Caller) error {
	id, err := s.tenantEnvironment(r)
	if err != nil {
		return err
	}
	env, err := s.cfg.Store.Environment(r.Context(), id)
	if err != nil {
		return err
	}
	return s.rotate(w, r, env)
}

// labelsRequest is the body that sets labels.
type labelsRequest struct {
	Labels map[string]string `json:"labels"`
}

// environmentLabels reads a {"labels"} body for the path's environment of the tenant, and
// checks the labels (what names them in a refusal).
func (s *Server) environmentLabels(r *http.Request, what string) (string, labelsRequest, error) {
	var req labelsRequest
	if err := decode(r, &req, smallBody); err != nil {
		return "", req, err
	}
	env, err := s.tenantEnvironment(r)
	if err != nil {
		return "", req, err
	}
	if err := targeting.ValidateLabels(what, req.Labels); err != nil {
		return "", req, fail(http.StatusBadRequest, "%v", err)
	}
	return env, req, nil
}

// setEnvironmentLabels is PUT /admin/tenants/{tenant}/environments/{env}/labels {"labels"}.
func (s *Server) setEnvironmentLabels(w http.ResponseWriter, r *http.Request, _ authz.Caller) error {
	env, req, err := s.environmentLabels(r, "environment labels")
	if err != nil {
		return err
	}
	if err := s.cfg.Store.SetEnvironmentLabels(r.Context(), env, req.Labels); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, req)
	return nil
}

// setNamespaceTarget is PUT /admin/tenants/{tenant}/environments/{env}/namespace-targets/{namespace}.
func (s *Server) setNamespaceTarget(w http.ResponseWriter, r *http.Request, _ authz.Caller) error {
	ns := r.PathValue("namespace")
	if err := validName("namespace", ns); err != nil {
		return err
	}
	env, req, err := s.environmentLabels(r, "namespace target labels")
	if err != nil {
		return err
	}
	if err := s.cfg.Store.SetNamespaceTarget(r.Context(), env, ns, req.Labels); err != nil {
		return err
	}
	auditOf(r).target = env + "/" + ns
	writeJSON(w, http.StatusOK, req)
	return nil
}

// registerEnvironment creates an environment and its connect token.
func (s *Server) registerEnvironment(ctx context.Context, name string) (storage.Environment, string, error) {
	id := randomID(6) // 12 lowercase hex digits
	token, err := connecttoken.New(id)
	if err != nil {
		return storage.Environment{}, "", fmt.Errorf("cannot issue a token: %w", err)
	}
	if err := s.cfg.Store.CreateEnvironment(ctx, id, name, connecttoken.Hash(token)); err != nil {
		return storage.Environment{}, "", err
	}
	env, err := s.cfg.Store.Environment(ctx, id)
	s.log().Info("environment registered", "environment", id)
	return env, token, err
}

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
	env, err := s.cfg.Store.Environment(r.Context(), r.PathValue("env"))
	if errors.Is(err, storage.ErrNotFound) {
		return env, fail(http.StatusNotFound, "no environment %s", r.PathValue("env"))
	} else if err != nil {
		return env, err
	}
	tenant, err := s.cfg.Store.EnvironmentTenant(r.Context(), env.ID)
	if err != nil {
		return env, err
	}
	auditOf(r).tenant, auditOf(r).target = tenant, env.ID
	return env, nil
}

// createEnvironment is POST /admin/environments {"name"}: an environment outside any tenant.
func (s *Server) createEnvironment(w http.ResponseWriter, r *http.Request) error {
	return s.createEnvironmentIn(w, r, "")
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
	if err := s.cfg.Store.RotateToken(r.Context(), env.ID, connecttoken.Hash(token), until); err != nil {
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
	at, body, err := s.cfg.Store.LastHeartbeat(ctx, envID)
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
	envs, err := s.cfg.Store.Environments(r.Context())
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
		hb.Deployments, view.InventoryComplete, err = s.cfg.Store.Inventory(r.Context(), env.ID)
		if err != nil {
			return err
		}
		view.Inventory = &hb
	}
	cmds, err := s.cfg.Store.Commands(r.Context(), env.ID)
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
