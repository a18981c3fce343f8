package controlplane

import (
	"context"
	"crypto/ed25519"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/nexo-io/nexo-edge/controlplane/authz"
	"github.com/nexo-io/nexo-edge/controlplane/storage"
)

// Config is what a Control Plane serves with.
type Config struct {
	// Store is the Control Plane's database (storage.Open); required.
	Store *storage.Store
	// Key seeds the store's signing keys on first use (docs/security.md, "Managed-resource
	// signatures"); afterwards the store is the truth (keys.go).
	Key ed25519.PrivateKey
	// AdminToken guards /admin ("" disables the admin token).
	AdminToken string
	// NextHeartbeat is what heartbeat responses ask for (default 30s).
	NextHeartbeat time.Duration
	// PublicURL is the URL Managers reach this Control Plane at, named in install commands.
	PublicURL string
	// Now is the clock for heartbeat ages and expiries (time.Now when nil).
	Now func() time.Time
	Log *slog.Logger
	// KeyEncryption encrypts the signing keys the store holds (keys.go); required.
	KeyEncryption KeyEncrypter
	// Checkpoint, when set, anchors the audit history's head outside the database
	// (checkpoint.go).
	Checkpoint *Checkpoint
}

// Server serves the Manager protocol (/v1, managerapi.go) and the admin API (/admin,
// environments.go, tenants.go, principals.go, projects.go, stagecommands.go, revisions.go,
// lifecycle.go, freeze.go, audit.go, entitlement.go, keys.go); commands.go prepares, checks
// (compatibility.go among them) and queues every command.
type Server struct {
	cfg   Config
	auth  authz.Authenticator
	noise noiseLimiter
	// revisionProxies caches the NexoProxies of each revision (revisions never change), which
	// every evaluation of a stage's run reads (lifecycle.go).
	revisionProxies sync.Map // revisionKey → []protocol.ObjectRef
}

// New prepares a Server to serve: it verifies the audit history against its checkpoint (refusing
// to start on a broken one, naming why), anchors the current head, and from then on has every
// committed append update the checkpoint; it seeds the signing keys, and seals those an earlier
// version stored in plaintext.
func New(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Store == nil {
		return nil, errors.New("the Control Plane needs a store")
	}
	s := &Server{cfg: cfg, auth: authz.Authenticator{Store: cfg.Store, AdminToken: cfg.AdminToken}}
	if err := s.init(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// Handler returns the HTTP handler. Every route goes through endpoint (httpapi.go): one
// transaction, strict bodies, one answer; every admin and tenancy route is audited under the
// name its records carry.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/heartbeat", s.endpoint("", s.heartbeat))
	mux.HandleFunc("POST /v1/commands/{id}/ack", s.endpoint("command.ack", s.ack))
	// The admin token's routes.
	for _, route := range []struct {
		pattern, action string
		h               func(http.ResponseWriter, *http.Request) error
	}{
		{"POST /admin/environments", "environment.create", s.createEnvironment},
		{"GET /admin/environments", "environment.list", s.listEnvironments},
		{"GET /admin/environments/{env}", "environment.show", s.showEnvironment},
		{"POST /admin/environments/{env}/commands", "command.queue", s.enqueue},
		{"POST /admin/environments/{env}/token", "environment.rotate-token", s.rotateToken},
		{"GET /admin/environments/{env}/install", "environment.install-command", s.installCommand},
		{"POST /admin/signing-keys/rotate", "signing-key.rotate", s.rotateKey},
		{"POST /admin/signing-keys/{key}/retire", "signing-key.retire", s.retireKey},
		{"GET /admin/audit", "audit.query", s.queryAudit},
		{"GET /admin/audit/verify", "audit.verify", s.verifyAudit},
		{"POST /admin/tenants", "tenant.create", s.createTenant},
		{"PUT /admin/tenants/{tenant}/entitlement", "tenant.entitlement", s.setEntitlement},
	} {
		mux.HandleFunc(route.pattern, s.admin(route.action, route.h))
	}
	// Tenancy: the admin token or a principal's, authorized by role (auth.go, authz).
	for _, route := range []struct {
		pattern string
		action  authz.Action
		h       func(http.ResponseWriter, *http.Request, authz.Caller) error
	}{
		{"GET /admin/tenants/{tenant}/principals", authz.ManagePrincipals, s.listPrincipals},
		{"POST /admin/tenants/{tenant}/principals", authz.ManagePrincipals, s.createPrincipal},
		{"DELETE /admin/tenants/{tenant}/principals/{principal}", authz.ManagePrincipals, s.deletePrincipal},
		{"POST /admin/tenants/{tenant}/principals/{principal}/token", authz.ManagePrincipals, s.rotatePrincipalToken},
		{"POST /admin/tenants/{tenant}/role-bindings", authz.ManagePrincipals, s.bindRole},
		{"DELETE /admin/tenants/{tenant}/principals/{principal}/role-bindings/{role}", authz.ManagePrincipals, s.unbindRole},
		{"POST /admin/tenants/{tenant}/environments", authz.ManageEnvironments, s.createTenantEnvironment},
		{"POST /admin/tenants/{tenant}/environments/{env}/token", authz.ManageEnvironments, s.rotateTenantToken},
		{"PUT /admin/tenants/{tenant}/environments/{env}/labels", authz.SetEnvironmentLabels, s.setEnvironmentLabels},
		{"PUT /admin/tenants/{tenant}/environments/{env}/namespace-targets/{namespace}", authz.ManageNamespaceTarget, s.setNamespaceTarget},
		{"POST /admin/tenants/{tenant}/projects", authz.ManageProjects, s.createProject},
		{"PUT /admin/tenants/{tenant}/projects/{project}/stages/{stage}", authz.SetStage, s.setStage},
		{"GET /admin/tenants/{tenant}/projects/{project}/stages/{stage}/targets", authz.ReadTargets, s.targets},
		{"POST /admin/tenants/{tenant}/projects/{project}/stages/{stage}/deploy", authz.Deploy, s.deployThroughStage},
		{"POST /admin/tenants/{tenant}/projects/{project}/stages/{stage}/rollout", authz.Rollout, s.rolloutThroughStage},
		{"POST /admin/tenants/{tenant}/projects/{project}/stages/{stage}/uninstall", authz.Uninstall, s.uninstallThroughStage},
		{"GET /admin/tenants/{tenant}/audit", authz.ReadAudit, s.tenantAudit},
		{"GET /admin/tenants/{tenant}/entitlement", authz.ReadEntitlement, s.getEntitlement},
		// Change management (revisions.go, lifecycle.go, freeze.go).
		{"POST /admin/tenants/{tenant}/projects/{project}/revisions", authz.CreateRevision, s.createRevision},
		{"GET /admin/tenants/{tenant}/projects/{project}/revisions", authz.ReadChanges, s.listRevisions},
		{"GET /admin/tenants/{tenant}/projects/{project}/revisions/{revision}", authz.ReadChanges, s.showRevision},
		{"GET /admin/tenants/{tenant}/projects/{project}/revisions/{revision}/diff", authz.ReadChanges, s.diffRevisions},
		{"POST /admin/tenants/{tenant}/projects/{project}/stages/{stage}/preview", authz.Preview, s.previewThroughStage},
		{"GET /admin/tenants/{tenant}/projects/{project}/previews/{id}", authz.ReadChanges, s.showPreview},
		{"GET /admin/tenants/{tenant}/projects/{project}/stages/{stage}/status", authz.ReadChanges, s.stageStatus},
		{"POST /admin/tenants/{tenant}/projects/{project}/stages/{stage}/rollback", authz.Rollback, s.rollbackThroughStage},
		{"POST /admin/tenants/{tenant}/projects/{project}/stages/{stage}/promote", authz.Promote, s.promote},
		{"GET /admin/tenants/{tenant}/projects/{project}/promotions", authz.ReadChanges, s.listPromotions},
		{"GET /admin/tenants/{tenant}/projects/{project}/promotions/{id}", authz.ReadChanges, s.showPromotion},
		{"POST /admin/tenants/{tenant}/projects/{project}/promotions/{id}/approve", authz.ApprovePromotion, s.approvePromotion},
		{"PUT /admin/tenants/{tenant}/environments/{env}/freeze", authz.FreezeEnvironment, s.freezeEnvironment},
		{"DELETE /admin/tenants/{tenant}/environments/{env}/freeze", authz.FreezeEnvironment, s.thawEnvironment},
		{"PUT /admin/tenants/{tenant}/projects/{project}/stages/{stage}/freeze", authz.FreezeStage, s.freezeStage},
		{"DELETE /admin/tenants/{tenant}/projects/{project}/stages/{stage}/freeze", authz.FreezeStage, s.thawStage},
		{"GET /admin/tenants/{tenant}/environments/{env}/health", authz.ReadHealth, s.environmentHealth},
	} {
		mux.HandleFunc(route.pattern, s.tenantRoute(route.action, route.h))
	}
	return mux
}

func (s *Server) now() time.Time {
	if s.cfg.Now != nil {
		return s.cfg.Now()
	}
	return time.Now()
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
