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
	"github.com/nexo-io/nexo-edge/connecttoken"
	"github.com/nexo-io/nexo-edge/protocol"
	"github.com/nexo-io/nexo-edge/signature"
)

// Server serves the Manager protocol (/v1) and the admin API (/admin).
type Server struct {
	Store *Store
	// Key signs deploy manifests (PRODUCT §3); its public key goes into the operator's
	// trusted-keys Secret.
	Key ed25519.PrivateKey
	// AdminToken guards /admin.
	AdminToken string
	// NextHeartbeat is what heartbeat responses ask for (default 30s).
	NextHeartbeat time.Duration
	Log           *slog.Logger
}

// Handler returns the HTTP handler.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/heartbeat", s.heartbeat)
	mux.HandleFunc("POST /v1/commands/{id}/ack", s.ack)
	mux.HandleFunc("POST /admin/environments", s.admin(s.createEnvironment))
	mux.HandleFunc("GET /admin/environments/{env}", s.admin(s.showEnvironment))
	mux.HandleFunc("POST /admin/environments/{env}/commands", s.admin(s.enqueue))
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
	env, err := s.Store.EnvironmentByTokenHash(r.Context(), connecttoken.Hash(tok))
	if errors.Is(err, ErrNotFound) {
		writeError(w, http.StatusUnauthorized, "unknown connect token")
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
	resp := protocol.HeartbeatResponse{NextHeartbeatSeconds: int(s.nextHeartbeat().Seconds()), Commands: []protocol.Command{}}
	for _, rec := range records {
		var c protocol.Command
		if err := json.Unmarshal([]byte(rec.Body), &c); err == nil {
			resp.Commands = append(resp.Commands, c)
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
	switch err := s.Store.Ack(r.Context(), env.ID, r.PathValue("id"), a.Status, a.Message); {
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
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || strings.TrimSpace(req.Name) == "" {
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

// EnvironmentView is the admin API's view of an environment: inventory and command history.
type EnvironmentView struct {
	Environment
	LastHeartbeat *time.Time          `json:"lastHeartbeat,omitempty"`
	Inventory     *protocol.Heartbeat `json:"inventory,omitempty"`
	Commands      []CommandRecord     `json:"commands"`
}

func (s *Server) showEnvironment(w http.ResponseWriter, r *http.Request) {
	env, err := s.Store.Environment(r.Context(), r.PathValue("env"))
	if errors.Is(err, ErrNotFound) {
		writeError(w, http.StatusNotFound, "no environment %s", r.PathValue("env"))
		return
	}
	view := EnvironmentView{Environment: env}
	if at, body, err := s.Store.LastHeartbeat(r.Context(), env.ID); err == nil && body != "" {
		var hb protocol.Heartbeat
		_ = json.Unmarshal([]byte(body), &hb)
		view.LastHeartbeat, view.Inventory = &at, &hb
	}
	view.Commands, _ = s.Store.Commands(r.Context(), env.ID)
	if view.Commands == nil {
		view.Commands = []CommandRecord{}
	}
	writeJSON(w, http.StatusOK, view)
}

// enqueue validates a command and queues it; deploy manifests are signed here.
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
	body, _ := json.Marshal(c)
	if err := s.Store.Enqueue(r.Context(), env.ID, c.ID, c.Type, string(body)); err != nil {
		writeError(w, http.StatusInternalServerError, "storage error")
		return
	}
	writeJSON(w, http.StatusCreated, map[string]string{"id": c.ID})
}

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
			if err := signature.Sign(u, s.Key); err != nil {
				return fmt.Errorf("manifest %d: %v", i, err)
			}
			signed, err := u.MarshalJSON()
			if err != nil {
				return err
			}
			c.Manifests[i] = signed
		}
	case protocol.Rollout:
		if c.Image == "" {
			return errors.New("rollout needs an image")
		}
		return s.resignProxies(ctx, envID, c)
	case protocol.Upgrade:
		if c.TargetVersion == "" {
			return errors.New("upgrade needs a targetVersion")
		}
	case protocol.Uninstall:
		if c.Proxy == nil || c.Proxy.Namespace == "" || c.Proxy.Name == "" {
			return errors.New("uninstall needs a proxy {namespace, name}")
		}
	default:
		return fmt.Errorf("unknown command type %q: use deploy, rollout, upgrade or uninstall", c.Type)
	}
	return nil
}

// resignProxies attaches to a rollout the NexoProxies this environment last deployed (the named
// one, or all), with spec.proxyImage set to the new image and signed again: the Manager holds no
// signing key, and editing a signed object in the cluster would invalidate its signature.
func (s *Server) resignProxies(ctx context.Context, envID string, c *protocol.Command) error {
	bodies, err := s.Store.DeployBodies(ctx, envID)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, body := range bodies { // newest first: the latest manifest of each proxy wins
		var deployed protocol.Command
		if err := json.Unmarshal([]byte(body), &deployed); err != nil {
			continue
		}
		for _, raw := range deployed.Manifests {
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(raw); err != nil || u.GetKind() != "NexoProxy" {
				continue
			}
			key := u.GetNamespace() + "/" + u.GetName()
			if seen[key] || (c.Proxy != nil && (c.Proxy.Namespace != u.GetNamespace() || c.Proxy.Name != u.GetName())) {
				continue
			}
			seen[key] = true
			if err := unstructured.SetNestedField(u.Object, c.Image, "spec", "proxyImage"); err != nil {
				return err
			}
			if err := signature.Sign(u, s.Key); err != nil {
				return err
			}
			signed, err := u.MarshalJSON()
			if err != nil {
				return err
			}
			c.Manifests = append(c.Manifests, signed)
			if !slices.Contains(c.Namespaces, u.GetNamespace()) {
				c.Namespaces = append(c.Namespaces, u.GetNamespace())
			}
		}
	}
	return nil
}
