// Tenants: the admin token creates them (docs/controlplane.md, "Targeting").

package controlplane

import (
	"net/http"

	"github.com/nexo-io/nexo-edge/controlplane/storage"
)

// createTenant is POST /admin/tenants {"name"}: the admin token only.
func (s *Server) createTenant(w http.ResponseWriter, r *http.Request) error {
	name, err := decodeName(r, "tenant", validName)
	if err != nil {
		return err
	}
	if err := s.cfg.Store.CreateTenant(r.Context(), name, name); err != nil {
		return err
	}
	auditOf(r).tenant, auditOf(r).target = name, "tenant "+name
	writeJSON(w, http.StatusCreated, storage.Tenant{ID: name, Name: name})
	return nil
}
