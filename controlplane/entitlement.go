package controlplane

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/nexo-io/nexo-edge/controlplane/targeting"
)

// The license entitlement of a tenant (docs/controlplane.md, "License entitlement"): the last
// check before a deploy through a stage is signed and queued.

const entitlementSchema = `
CREATE TABLE IF NOT EXISTS entitlements (
  tenant_id TEXT PRIMARY KEY REFERENCES tenants(id), max_proxies INTEGER NOT NULL CHECK (max_proxies >= 0), expires_at TEXT NOT NULL);
`

// SetEntitlement stores a tenant's entitlement, replacing the one before.
func (s *Store) SetEntitlement(ctx context.Context, tenant string, e targeting.Entitlement) error {
	_, err := s.q(ctx).ExecContext(ctx, `INSERT INTO entitlements(tenant_id, max_proxies, expires_at) VALUES(?,?,?)
		ON CONFLICT(tenant_id) DO UPDATE SET max_proxies = excluded.max_proxies, expires_at = excluded.expires_at`,
		tenant, e.MaxProxies, e.ExpiresAt.UTC().Format(time.RFC3339))
	return err
}

// Entitlement returns a tenant's entitlement, nil when it has none.
func (s *Store) Entitlement(ctx context.Context, tenant string) (*targeting.Entitlement, error) {
	var e targeting.Entitlement
	var expires string
	err := s.q(ctx).QueryRowContext(ctx, `SELECT max_proxies, expires_at FROM entitlements WHERE tenant_id = ?`, tenant).Scan(&e.MaxProxies, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if e.ExpiresAt, err = time.Parse(time.RFC3339, expires); err != nil {
		return nil, fmt.Errorf("entitlement of %s: %w", tenant, err)
	}
	return &e, nil
}

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
	if _, err := s.Store.TenantByID(r.Context(), tenant); errors.Is(err, ErrNotFound) {
		return fail(http.StatusNotFound, "no tenant %s", tenant)
	} else if err != nil {
		return err
	}
	auditOf(r).tenant, auditOf(r).target = tenant, "tenant "+tenant+" entitlement"
	if err := s.Store.SetEntitlement(r.Context(), tenant, e); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, e)
	return nil
}

// getEntitlement is GET /admin/tenants/{tenant}/entitlement: read-targets at the tenant's scope,
// so the tenant admin (project roles are scoped to their projects).
func (s *Server) getEntitlement(w http.ResponseWriter, r *http.Request, _ caller) error {
	tenant := r.PathValue("tenant")
	e, err := s.Store.Entitlement(r.Context(), tenant)
	if err != nil {
		return err
	}
	if e == nil {
		return fail(http.StatusNotFound, "tenant %s has no license entitlement", tenant)
	}
	writeJSON(w, http.StatusOK, e)
	return nil
}

// ProxyClaims counts the NexoProxies a tenant holds: those its environments report (their
// inventories), those in their deployed sets, and those in deploys and rollouts queued for them
// and not yet acknowledged, each environment/namespace/name once. It returns the count, and of
// env's, the namespace/name keys.
func (s *Store) ProxyClaims(ctx context.Context, tenant, env string) (int, map[string]bool, error) {
	rows, err := s.q(ctx).QueryContext(ctx, `
		WITH envs AS (SELECT env_id FROM environment_tenancy WHERE tenant_id = ?)
		SELECT env_id, namespace, name FROM inventory WHERE env_id IN envs
		UNION SELECT env_id, namespace, name FROM desired WHERE kind = 'NexoProxy' AND env_id IN envs
		UNION SELECT p.env_id, p.namespace, p.name FROM command_proxies p JOIN commands c ON c.id = p.command_id
			WHERE c.status IN ('pending', 'delivered') AND p.env_id IN envs`, tenant)
	if err != nil {
		return 0, nil, err
	}
	defer rows.Close()
	n, mine := 0, map[string]bool{}
	for rows.Next() {
		var e, ns, name string
		if err := rows.Scan(&e, &ns, &name); err != nil {
			return 0, nil, err
		}
		n++
		if e == env {
			mine[ns+"/"+name] = true
		}
	}
	return n, mine, rows.Err()
}

// entitled checks a deploy of objs into env against the tenant's entitlement (403 with the
// numbers when it is missing, expired or exceeded): the proxies the tenant holds (ProxyClaims)
// plus this deploy's NexoProxies it does not hold yet. It runs in the request's transaction,
// with the enqueue that follows it: two deploys cannot both take the last proxy.
func (s *Server) entitled(ctx context.Context, tenant, env string, objs []*unstructured.Unstructured) error {
	e, err := s.Store.Entitlement(ctx, tenant)
	if err != nil {
		return err
	}
	held, mine, err := s.Store.ProxyClaims(ctx, tenant, env)
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
