package controlplane

import (
	"crypto/ed25519"
	"log/slog"
	"net/http"
	"time"

	"github.com/nexo-io/nexo-edge/controlplane/storage"
	"github.com/nexo-io/nexo-edge/controlplane/targeting"
)

// Server serves the Manager protocol (/v1, managerapi.go) and the admin API (/admin,
// adminapi.go); commands.go signs and prepares what the admin API queues.
type Server struct {
	Store *storage.Store
	// Key signs deploy manifests (docs/security.md, "Managed-resource signatures"); its public
	// key goes into the operator's trusted-keys Secret.
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
	// KeyEncryption encrypts the signing keys the store holds (keys.go); required.
	KeyEncryption KeyEncrypter
	// Checkpoint, when set, anchors the audit history's head outside the database
	// (checkpoint.go).
	Checkpoint *Checkpoint

	noise noiseLimiter
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
	// Tenancy (tenancyapi.go): the admin token or a principal's, authorized by role.
	for _, route := range []struct {
		pattern string
		action  targeting.Action
		h       func(http.ResponseWriter, *http.Request, caller) error
	}{
		{"GET /admin/tenants/{tenant}/principals", targeting.ManagePrincipals, s.listPrincipals},
		{"POST /admin/tenants/{tenant}/principals", targeting.ManagePrincipals, s.createPrincipal},
		{"DELETE /admin/tenants/{tenant}/principals/{principal}", targeting.ManagePrincipals, s.deletePrincipal},
		{"POST /admin/tenants/{tenant}/principals/{principal}/token", targeting.ManagePrincipals, s.rotatePrincipalToken},
		{"POST /admin/tenants/{tenant}/role-bindings", targeting.ManagePrincipals, s.bindRole},
		{"DELETE /admin/tenants/{tenant}/principals/{principal}/role-bindings/{role}", targeting.ManagePrincipals, s.unbindRole},
		{"POST /admin/tenants/{tenant}/environments", targeting.ManageEnvironments, s.createTenantEnvironment},
		{"POST /admin/tenants/{tenant}/environments/{env}/token", targeting.ManageEnvironments, s.rotateTenantToken},
		{"PUT /admin/tenants/{tenant}/environments/{env}/labels", targeting.SetEnvironmentLabels, s.setEnvironmentLabels},
		{"PUT /admin/tenants/{tenant}/environments/{env}/namespace-targets/{namespace}", targeting.ManageNamespaceTarget, s.setNamespaceTarget},
		{"POST /admin/tenants/{tenant}/projects", targeting.ManageProjects, s.createProject},
		{"PUT /admin/tenants/{tenant}/projects/{project}/stages/{stage}", targeting.SetStage, s.setStage},
		{"GET /admin/tenants/{tenant}/projects/{project}/stages/{stage}/targets", targeting.ReadTargets, s.targets},
		{"POST /admin/tenants/{tenant}/projects/{project}/stages/{stage}/deploy", targeting.Deploy, s.deployThroughStage},
		{"POST /admin/tenants/{tenant}/projects/{project}/stages/{stage}/rollout", targeting.Rollout, s.rolloutThroughStage},
		{"POST /admin/tenants/{tenant}/projects/{project}/stages/{stage}/uninstall", targeting.Uninstall, s.uninstallThroughStage},
		{"GET /admin/tenants/{tenant}/audit", targeting.ReadAudit, s.tenantAudit},
		{"GET /admin/tenants/{tenant}/entitlement", targeting.ReadTargets, s.getEntitlement},
	} {
		mux.HandleFunc(route.pattern, s.tenantRoute(route.action, route.h))
	}
	return mux
}

func (s *Server) now() time.Time {
	if s.Now != nil {
		return s.Now()
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
