package controlplane

import (
	"context"
	"errors"
	"net/http"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/nexo-io/nexo-edge/controlplane/authz"
	"github.com/nexo-io/nexo-edge/controlplane/storage"
	"github.com/nexo-io/nexo-edge/controlplane/targeting"
)

// The license entitlement of a tenant (docs/controlplane.md, "License entitlement"): the last
// check before a deploy through a stage is signed and queued.

// setEntitlement is PUT /admin/tenants/{tenant}/entitlement {"maxProxies", "expiresAt"}: the
// admin token only, since it is the license a tenant bought, not a tenant's setting.
func (s *Server) setEntitlement(w http.ResponseWriter, r *http.Request) error {
	tenant := r.PathValue("tenant")
	var e targeting.Entitlement
	if err := decode(r, &e, smallBody); err != nil {
		return err
	}
	if err := e.Validate(); err != nil {
		return fail(http.StatusBadRequest, "entitlement: %v", err)
	}
	if _, err := s.cfg.Store.TenantByID(r.Context(), tenant); errors.Is(err, storage.ErrNotFound) {
		return fail(http.StatusNotFound, "no tenant %s", tenant)
	} else if err != nil {
		return err
	}
	auditOf(r).tenant, auditOf(r).target = tenant, "tenant "+tenant+" entitlement"
	if err := s.cfg.Store.SetEntitlement(r.Context(), tenant, e); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, e)
	return nil
}

// getEntitlement is GET /admin/tenants/{tenant}/entitlement (entitlement.read: the tenant
// admin).
func (s *Server) getEntitlement(w http.ResponseWriter, r *http.Request, _ authz.Caller) error {
	tenant := r.PathValue("tenant")
	e, err := s.cfg.Store.Entitlement(r.Context(), tenant)
	if err != nil {
		return err
	}
	if e == nil {
		return fail(http.StatusNotFound, "tenant %s has no license entitlement", tenant)
	}
	writeJSON(w, http.StatusOK, e)
	return nil
}

// entitled checks a deploy of objs into env against the tenant's entitlement (403 with the
// numbers when it is missing, expired or exceeded): the proxies the tenant holds (ProxyClaims)
// plus this deploy's NexoProxies it does not hold yet. It runs in the request's transaction,
// with the enqueue that follows it: two deploys cannot both take the last proxy.
func (s *Server) entitled(ctx context.Context, tenant, env string, objs []*unstructured.Unstructured) error {
	e, err := s.cfg.Store.Entitlement(ctx, tenant)
	if err != nil {
		return err
	}
	held, mine, err := s.cfg.Store.ProxyClaims(ctx, tenant, env)
	if err != nil {
		return err
	}
	adding := map[string]bool{}
	for _, u := range objs {
		if key := u.GetNamespace() + "/" + u.GetName(); u.GetKind() == "NexoProxy" && !mine[key] {
			adding[key] = true
		}
	}
	if err := targeting.AllowsDeploy(e, tenant, s.now(), held, len(adding)); err != nil {
		return fail(http.StatusForbidden, "%v", err)
	}
	return nil
}
