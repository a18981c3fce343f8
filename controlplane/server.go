package controlplane

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/nexo-io/nexo-edge/catalog"
	"github.com/nexo-io/nexo-edge/contract/connecttoken"
	"github.com/nexo-io/nexo-edge/contract/protocol"
	"github.com/nexo-io/nexo-edge/contract/signature"
)

// Server serves the Manager protocol (/v1) and the admin API (/admin).
type Server struct {
	Store *Store
	// Key signs deploy manifests (docs/security.md, "Managed-resource signatures"); its public key goes into the operator's
	// trusted-keys Secret.
	Key ed25519.PrivateKey
	// AdminToken guards /admin.
	AdminToken string
	// NextHeartbeat is what heartbeat responses ask for (default 30s).
	NextHeartbeat time.Duration
	// PublicURL is the URL Managers reach this Control Plane at, named in install commands.
	PublicURL string
	// Now is the clock for heartbeat ages (time.Now when nil).
	Now func() time.Time
	Log *slog.Logger
}

// Handler returns the HTTP handler.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/heartbeat", s.heartbeat)
	mux.HandleFunc("POST /v1/commands/{id}/ack", s.ack)
	mux.HandleFunc("POST /admin/environments", s.admin(s.createEnvironment))
	mux.HandleFunc("GET /admin/environments", s.admin(s.listEnvironments))
	mux.HandleFunc("GET /admin/environments/{env}", s.admin(s.showEnvironment))
	mux.HandleFunc("POST /admin/environments/{env}/commands", s.admin(s.enqueue))
	mux.HandleFunc("POST /admin/environments/{env}/token", s.admin(s.rotateToken))
	mux.HandleFunc("GET /admin/environments/{env}/install", s.admin(s.installCommand))
	mux.HandleFunc("POST /admin/signing-keys/rotate", s.admin(s.rotateKey))
	mux.HandleFunc("POST /admin/signing-keys/{key}/retire", s.admin(s.retireKey))
	return mux
}

func (s *Server) log() *slog.Logger {
	if s.Log != nil {
		return s.Log
	}
	return slog.Default()
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, code int, format string, args ...any) {
	writeJSON(w, code, protocol.Error{Error: fmt.Sprintf(format, args...)})
}

func bearer(r *http.Request) string {
	return strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
}

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
		}
	}
	writeJSON(w, http.StatusOK, resp)
}

func (s *Server) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
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
	switch err := s.Store.Ack(r.Context(), env.ID, r.PathValue("id"), a.Status, a.Message, deployedObjects); {
	case errors.Is(err, ErrNotFound):
		writeError(w, http.StatusNotFound, "no command %s for this environment", r.PathValue("id"))
	case err != nil:
		writeError(w, http.StatusInternalServerError, "storage error")
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

func (s *Server) admin(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.AdminToken == "" || subtle.ConstantTimeCompare([]byte(bearer(r)), []byte(s.AdminToken)) != 1 {
			writeError(w, http.StatusUnauthorized, "admin token required")
			return
		}
		h(w, r)
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
	id := randomID(6) // 12 lowercase hex digits
	token, err := connecttoken.New(id)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "cannot issue a token")
		return
	}
	if err := s.Store.CreateEnvironment(r.Context(), id, req.Name, connecttoken.Hash(token)); err != nil {
		writeError(w, http.StatusInternalServerError, "storage error")
		return
	}
	env, _ := s.Store.Environment(r.Context(), id)
	s.log().Info("environment registered", "environment", id, "name", req.Name)
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
	if c.Type == protocol.Uninstall {
		// The proxy leaves the deployed set now: a rollout queued after this never re-creates it.
		if err := s.Store.Forget(r.Context(), env.ID, "NexoProxy", c.Proxy.Namespace, c.Proxy.Name); err != nil {
			s.log().Error("forget uninstalled proxy", "environment", env.ID, "error", err)
		}
	}
	writeJSON(w, http.StatusCreated, map[string]string{"id": c.ID})
}

func sign(key ed25519.PrivateKey, raw json.RawMessage, claims signature.Claims) (json.RawMessage, error) {
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(raw); err != nil {
		return nil, err
	}
	if err := signature.Sign(u, key, claims); err != nil {
		return nil, err
	}
	return u.MarshalJSON()
}

// prepare validates a command; deploy manifests are checked here and signed when queued.
func (s *Server) prepare(ctx context.Context, envID string, c *protocol.Command) error {
	switch c.Type {
	case protocol.Deploy:
		if len(c.Namespaces) == 0 || len(c.Manifests) == 0 {
			return errors.New("deploy needs namespaces and manifests")
		}
		for i, raw := range c.Manifests {
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(raw); err != nil {
				return fmt.Errorf("manifest %d: %v", i, err)
			}
			if _, ok := catalog.Lookup(u.GetKind()); !ok || u.GroupVersionKind().Group != catalog.Group {
				return fmt.Errorf("manifest %d is %s %s: only nexo.io kinds are deployed", i, u.GetAPIVersion(), u.GetKind())
			}
			if !slices.Contains(c.Namespaces, u.GetNamespace()) {
				return fmt.Errorf("manifest %d (%s %s) is in namespace %q, not one of %v", i, u.GetKind(), u.GetName(), u.GetNamespace(), c.Namespaces)
			}
		}
	case protocol.Rollout:
		if c.Image == "" {
			return errors.New("rollout needs an image")
		}
		return s.rolloutProxies(ctx, envID, c)
	case protocol.Upgrade:
		if c.TargetVersion == "" {
			return errors.New("upgrade needs a targetVersion")
		}
	case protocol.Uninstall:
		if c.Proxy == nil || c.Proxy.Namespace == "" || c.Proxy.Name == "" {
			return errors.New("uninstall needs a proxy {namespace, name}")
		}
	case protocol.WorkloadConfig:
		return errors.New("legacy workload configuration is not supported by Managers of this protocol: deploy the equivalent nexo.io objects (NexoProxy, NexoPipeline, NexoDeploymentProfile, steps) instead")
	default:
		return fmt.Errorf("unknown command type %q: use deploy, rollout, upgrade or uninstall", c.Type)
	}
	return nil
}

// rolloutProxies attaches to a rollout the NexoProxies of the environment's deployed set (the
// named one, or all) with spec.proxyImage set to the new image; enqueue signs them again. The
// Manager holds no signing key, and editing a signed object in the cluster would invalidate its
// signature. An uninstalled proxy has left the deployed set, so a rollout never re-creates it.
func (s *Server) rolloutProxies(ctx context.Context, envID string, c *protocol.Command) error {
	proxies, err := s.Store.Desired(ctx, envID, "NexoProxy")
	if err != nil {
		return err
	}
	for _, d := range proxies {
		if c.Proxy != nil && (c.Proxy.Namespace != d.Namespace || c.Proxy.Name != d.Name) {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON([]byte(d.Manifest)); err != nil {
			return err
		}
		if err := unstructured.SetNestedField(u.Object, c.Image, "spec", "proxyImage"); err != nil {
			return err
		}
		raw, err := u.MarshalJSON()
		if err != nil {
			return err
		}
		c.Manifests = append(c.Manifests, raw)
		if !slices.Contains(c.Namespaces, d.Namespace) {
			c.Namespaces = append(c.Namespaces, d.Namespace)
		}
	}
	if c.Proxy != nil && len(c.Manifests) == 0 {
		return fmt.Errorf("NexoProxy %s/%s is not deployed in this environment", c.Proxy.Namespace, c.Proxy.Name)
	}
	return nil
}

// deployedObjects lists the manifests of an applied deploy or rollout, for the deployed set.
func deployedObjects(body string) []DesiredObject {
	var c protocol.Command
	if json.Unmarshal([]byte(body), &c) != nil || (c.Type != protocol.Deploy && c.Type != protocol.Rollout) {
		return nil
	}
	var out []DesiredObject
	for _, raw := range c.Manifests {
		u := &unstructured.Unstructured{}
		if u.UnmarshalJSON(raw) != nil {
			continue
		}
		out = append(out, DesiredObject{Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName(), Manifest: string(raw)})
	}
	return out
}

// NewHTTPServer wraps the handler in an http.Server with read, write and idle timeouts, so a
// slow or stalled client cannot hold a connection (or a goroutine) open.
func NewHTTPServer(addr string, h http.Handler) *http.Server {
	return &http.Server{
		Addr: addr, Handler: h,
		ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute,
		MaxHeaderBytes: 64 << 10,
	}
}
