// Principals and their roles (docs/controlplane.md, "Targeting" and "Revocation"): created,
// listed, deleted, their tokens rotated, roles bound and unbound, by a tenant admin.

package controlplane

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/nexo-io/nexo-edge/controlplane/authz"
	"github.com/nexo-io/nexo-edge/controlplane/storage"
	"github.com/nexo-io/nexo-edge/controlplane/targeting"
)

// TokenLifetime is the body of a principal's creation or token rotation: how long the token
// lasts (DefaultPrincipalTokenLifetime when 0, at most MaxPrincipalTokenLifetime).
type TokenLifetime struct {
	ExpiresInSeconds int64 `json:"expiresInSeconds,omitempty"`
}

func (t TokenLifetime) expiry(now time.Time) (time.Time, error) {
	d := time.Duration(t.ExpiresInSeconds) * time.Second
	switch {
	case t.ExpiresInSeconds == 0:
		d = storage.DefaultPrincipalTokenLifetime
	case t.ExpiresInSeconds < 0 || d > storage.MaxPrincipalTokenLifetime:
		return time.Time{}, fail(http.StatusBadRequest, "expiresInSeconds must be between 1 and %d (366 days)", int64(storage.MaxPrincipalTokenLifetime.Seconds()))
	}
	return now.Add(d), nil
}

// NewPrincipal is the answer to a principal's creation or token rotation: its token is shown
// this once.
type NewPrincipal struct {
	storage.Principal
	Token string `json:"token"`
}

// listPrincipals is GET /admin/tenants/{tenant}/principals: every principal, its bindings and
// when its token expires, for review. Never a token.
func (s *Server) listPrincipals(w http.ResponseWriter, r *http.Request, _ authz.Caller) error {
	ps, err := s.cfg.Store.Principals(r.Context(), r.PathValue("tenant"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"principals": ps})
	return nil
}

// createPrincipal is POST /admin/tenants/{tenant}/principals {"name", "expiresInSeconds"}.
func (s *Server) createPrincipal(w http.ResponseWriter, r *http.Request, _ authz.Caller) error {
	var req struct {
		Name string `json:"name"`
		TokenLifetime
	}
	if err := decode(r, &req, smallBody); err != nil {
		return err
	}
	if err := validName("principal", req.Name); err != nil {
		return err
	}
	expires, err := req.expiry(s.now())
	if err != nil {
		return err
	}
	tenant := r.PathValue("tenant")
	p := storage.Principal{ID: "p-" + randomID(8), Tenant: tenant, Name: req.Name, Created: s.now().UTC(), TokenExpiresAt: expires.UTC()}
	token := "nexo-principal-" + randomID(24)
	if err := s.cfg.Store.CreatePrincipal(r.Context(), p.ID, tenant, p.Name, token, expires); err != nil {
		return err
	}
	auditOf(r).target = "principal " + tenant + "/" + p.Name
	writeJSON(w, http.StatusCreated, NewPrincipal{Principal: p, Token: token})
	return nil
}

// pathPrincipal resolves the path's principal in its tenant (404 otherwise) and makes it the
// audit target.
func (s *Server) pathPrincipal(r *http.Request) (storage.Principal, error) {
	tenant, name := r.PathValue("tenant"), r.PathValue("principal")
	p, err := s.cfg.Store.PrincipalByName(r.Context(), tenant, name)
	if errors.Is(err, storage.ErrNotFound) {
		return p, fail(http.StatusNotFound, "no principal %s in tenant %s", name, tenant)
	} else if err != nil {
		return p, err
	}
	auditOf(r).target = "principal " + tenant + "/" + p.Name
	return p, nil
}

// deletePrincipal is DELETE /admin/tenants/{tenant}/principals/{principal}: the principal and
// its bindings go; its token is refused from its next request.
func (s *Server) deletePrincipal(w http.ResponseWriter, r *http.Request, _ authz.Caller) error {
	p, err := s.pathPrincipal(r)
	if err != nil {
		return err
	}
	if err := s.cfg.Store.DeletePrincipal(r.Context(), p.ID); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// rotatePrincipalToken is POST /admin/tenants/{tenant}/principals/{principal}/token
// {"expiresInSeconds"} (body optional): a new token, shown once; the old one is refused from
// its next request (a leaked token has no grace).
func (s *Server) rotatePrincipalToken(w http.ResponseWriter, r *http.Request, _ authz.Caller) error {
	var req TokenLifetime
	if r.ContentLength != 0 {
		if err := decode(r, &req, smallBody); err != nil {
			return err
		}
	}
	expires, err := req.expiry(s.now())
	if err != nil {
		return err
	}
	p, err := s.pathPrincipal(r)
	if err != nil {
		return err
	}
	token := "nexo-principal-" + randomID(24)
	if err := s.cfg.Store.RotatePrincipalToken(r.Context(), p.ID, token, expires); err != nil {
		return err
	}
	p.TokenExpiresAt = expires.UTC()
	writeJSON(w, http.StatusOK, NewPrincipal{Principal: p, Token: token})
	return nil
}

// bindingRequest is the body of a role binding.
type bindingRequest struct {
	Principal string         `json:"principal"`
	Role      targeting.Role `json:"role"`
	Project   string         `json:"project,omitempty"`
}

// checkBinding refuses a binding that cannot be meant: an unknown role, a tenant admin in a
// project, a project role without one, a project that does not exist.
func (s *Server) checkBinding(ctx context.Context, tenant string, b storage.Binding) error {
	if !slices.Contains(targeting.Roles, b.Role) {
		return fail(http.StatusBadRequest, "unknown role %q: one of %v", truncate(string(b.Role), 40), targeting.Roles)
	}
	switch {
	case b.Role == targeting.TenantAdmin && b.Project != "":
		return fail(http.StatusBadRequest, "tenant-admin is tenant-wide: leave project empty")
	case b.Role != targeting.TenantAdmin && b.Role != targeting.Viewer && b.Project == "":
		return fail(http.StatusBadRequest, "%s is bound in a project: name it", b.Role)
	}
	if b.Project != "" {
		if err := validName("project", b.Project); err != nil {
			return err
		}
		if ok, err := s.cfg.Store.ProjectExists(ctx, tenant, b.Project); err != nil {
			return err
		} else if !ok {
			return fail(http.StatusNotFound, "no project %s in tenant %s", b.Project, tenant)
		}
	}
	return nil
}

// bindRole is POST /admin/tenants/{tenant}/role-bindings {"principal", "role", "project"}.
func (s *Server) bindRole(w http.ResponseWriter, r *http.Request, _ authz.Caller) error {
	var req bindingRequest
	if err := decode(r, &req, smallBody); err != nil {
		return err
	}
	tenant := r.PathValue("tenant")
	if err := validName("principal", req.Principal); err != nil {
		return err
	}
	b := storage.Binding{Role: req.Role, Project: req.Project}
	if err := s.checkBinding(r.Context(), tenant, b); err != nil {
		return err
	}
	p, err := s.cfg.Store.PrincipalByName(r.Context(), tenant, req.Principal)
	if errors.Is(err, storage.ErrNotFound) {
		return fail(http.StatusNotFound, "no principal %s in tenant %s", req.Principal, tenant)
	} else if err != nil {
		return err
	}
	auditOf(r).target = "principal " + tenant + "/" + p.Name
	if err := s.cfg.Store.Bind(r.Context(), p.ID, b); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, b)
	return nil
}

// unbindRole is DELETE /admin/tenants/{tenant}/principals/{principal}/role-bindings/{role}
// [?project=P]: the role no longer applies from the principal's next request.
func (s *Server) unbindRole(w http.ResponseWriter, r *http.Request, _ authz.Caller) error {
	p, err := s.pathPrincipal(r)
	if err != nil {
		return err
	}
	b := storage.Binding{Role: targeting.Role(r.PathValue("role")), Project: r.URL.Query().Get("project")}
	if err := s.checkBinding(r.Context(), r.PathValue("tenant"), b); err != nil {
		return err
	}
	if err := s.cfg.Store.Unbind(r.Context(), p.ID, b); errors.Is(err, storage.ErrNotFound) {
		return fail(http.StatusNotFound, "principal %s does not hold %s in %s", p.Name, b.Role, orAll(b.Project))
	} else if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
