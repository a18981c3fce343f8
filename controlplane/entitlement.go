package controlplane

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

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
	_, err := s.db.ExecContext(ctx, `INSERT INTO entitlements(tenant_id, max_proxies, expires_at) VALUES(?,?,?)
		ON CONFLICT(tenant_id) DO UPDATE SET max_proxies = excluded.max_proxies, expires_at = excluded.expires_at`,
		tenant, e.MaxProxies, e.ExpiresAt.UTC().Format(time.RFC3339))
	return err
}

// Entitlement returns a tenant's entitlement, nil when it has none.
func (s *Store) Entitlement(ctx context.Context, tenant string) (*targeting.Entitlement, error) {
	var e targeting.Entitlement
	var expires string
	err := s.db.QueryRowContext(ctx, `SELECT max_proxies, expires_at FROM entitlements WHERE tenant_id = ?`, tenant).Scan(&e.MaxProxies, &expires)
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
func (s *Server) setEntitlement(w http.ResponseWriter, r *http.Request) {
	tenant := r.PathValue("tenant")
	auditOf(r).tenant, auditOf(r).target = tenant, "tenant "+tenant+" entitlement"
	var e targeting.Entitlement
	if !decode(w, r, &e) {
		return
	}
	if err := e.Validate(); err != nil {
		writeError(w, http.StatusBadRequest, "entitlement: %v", err)
		return
	}
	if _, err := s.Store.TenantByID(r.Context(), tenant); errors.Is(err, ErrNotFound) {
		writeError(w, http.StatusNotFound, "no tenant %s", tenant)
		return
	} else if err != nil {
		s.storageError(w, err)
		return
	}
	if err := s.Store.SetEntitlement(r.Context(), tenant, e); err != nil {
		s.storageError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, e)
}

// getEntitlement is GET /admin/tenants/{tenant}/entitlement: read-targets at the tenant's scope,
// so the tenant admin (project roles are scoped to their projects).
func (s *Server) getEntitlement(w http.ResponseWriter, r *http.Request, _ caller) {
	tenant := r.PathValue("tenant")
	e, err := s.Store.Entitlement(r.Context(), tenant)
	if err != nil {
		s.storageError(w, err)
		return
	}
	if e == nil {
		writeError(w, http.StatusNotFound, "tenant %s has no license entitlement", tenant)
		return
	}
	writeJSON(w, http.StatusOK, e)
}

// entitled checks a deploy of manifests into env/namespace against the tenant's entitlement:
// the proxies its environments last reported (their inventories), plus the NexoProxies of this
// deploy that env does not report yet. envs are the tenant's environments, as the stage's
// checks read them. It returns the refusal, or a storage error.
func (s *Server) entitled(ctx context.Context, tenant string, envs []targeting.Environment, env, namespace string, manifests []json.RawMessage) (refusal, err error) {
	e, err := s.Store.Entitlement(ctx, tenant)
	if err != nil {
		return nil, err
	}
	deployed := 0
	reported := map[string]bool{}
	for _, te := range envs {
		inv, _, err := s.Store.Inventory(ctx, te.ID)
		if err != nil {
			return nil, err
		}
		deployed += len(inv)
		if te.ID == env {
			for _, d := range inv {
				reported[d.Namespace+"/"+d.Name] = true
			}
		}
	}
	adding := 0
	for _, raw := range manifests {
		var m struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		}
		if json.Unmarshal(raw, &m) != nil || m.Kind != "NexoProxy" {
			continue
		}
		ns := m.Metadata.Namespace
		if ns == "" {
			ns = namespace
		}
		if !reported[ns+"/"+m.Metadata.Name] {
			adding++
		}
	}
	return targeting.AllowsDeploy(e, tenant, time.Now(), deployed, adding), nil
}
