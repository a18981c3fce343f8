// Authentication and authorization of admin API requests (docs/controlplane.md, "Targeting"):
// a request carries the platform's admin token (every action in every tenant) or a principal's
// token (its bindings, in its own tenant). authz decides; these wrap the routes, record the
// caller in the request's audit entry and answer 401 or 403.

package controlplane

import (
	"errors"
	"net/http"

	"github.com/nexo-io/nexo-edge/controlplane/authz"
	"github.com/nexo-io/nexo-edge/controlplane/storage"
)

// authenticate finds the caller of the request's bearer token and records it in the request's
// audit entry. Without a valid token it refuses (401), and the refusal is recorded as anonymous:
// no tenant, no target, rate-limited.
func (s *Server) authenticate(r *http.Request) (authz.Caller, error) {
	e := auditOf(r)
	c, err := s.auth.Authenticate(r.Context(), bearer(r), s.now())
	var expired authz.ExpiredError
	switch {
	case errors.Is(err, authz.ErrNoToken), errors.As(err, &expired):
		e.actor, e.role, e.anonymous = "unknown", "none", true
		return c, fail(http.StatusUnauthorized, "%v", err)
	case err != nil:
		e.actor, e.role, e.anonymous = "unknown", "none", true
		return c, err
	}
	e.actor, e.role = c.Actor(), c.Roles()
	if !c.Admin {
		e.tenant = c.Principal.Tenant
	}
	return c, nil
}

// admin serves a route of the admin token alone. A principal's token is refused (403) and
// recorded as that principal, in its tenant.
func (s *Server) admin(action string, h func(http.ResponseWriter, *http.Request) error) http.HandlerFunc {
	return s.endpoint(action, func(w http.ResponseWriter, r *http.Request) error {
		c, err := s.authenticate(r)
		if err != nil {
			return err
		}
		if !c.Admin {
			return fail(http.StatusForbidden, "%s may not %s: it takes the platform's admin token", c.Actor(), action)
		}
		if err := validPath(r); err != nil {
			return err
		}
		return h(w, r)
	})
}

// tenantRoute authenticates, authorizes action in the path's tenant (and project) and serves
// the request audited under the caller's role: 401 without a valid token, 403 without the role
// (naming the action, what the caller holds and the roles that may), 404 for a tenant that
// does not exist (asked by the admin token: a principal is refused before, in another tenant).
func (s *Server) tenantRoute(action authz.Action, h func(http.ResponseWriter, *http.Request, authz.Caller) error) http.HandlerFunc {
	return s.endpoint(string(action), func(w http.ResponseWriter, r *http.Request) error {
		c, err := s.authenticate(r)
		if err != nil {
			return err
		}
		if err := validPath(r); err != nil {
			return err
		}
		tenant, project := r.PathValue("tenant"), r.PathValue("project")
		role, err := authorize(c, action, tenant, project)
		if err != nil {
			if !c.Admin && c.Principal.Tenant != tenant {
				// Attempted in another tenant: that tenant's history records it too.
				if _, terr := s.cfg.Store.TenantByID(r.Context(), tenant); terr == nil {
					auditOf(r).otherTenant = tenant
				}
			}
			return err
		}
		e := auditOf(r)
		e.role = role
		if _, err := s.cfg.Store.TenantByID(r.Context(), tenant); errors.Is(err, storage.ErrNotFound) {
			return fail(http.StatusNotFound, "no tenant %s", tenant)
		} else if err != nil {
			return err
		}
		e.tenant, e.target = tenant, "tenant "+tenant
		return h(w, r, c)
	})
}

// orAll names a binding's scope: its project, or the tenant.
func orAll(project string) string {
	if project == "" {
		return "tenant"
	}
	return project
}

// authorize returns the role under which c may take action in tenant (and project), or a 403
// naming the action, what c holds and the roles that may.
func authorize(c authz.Caller, action authz.Action, tenant, project string) (string, error) {
	role, allowed := c.May(action, tenant, project)
	if allowed {
		return role, nil
	}
	where := scope(tenant, project)
	if !c.Admin && c.Principal.Tenant != tenant {
		where = "another tenant"
	}
	return "", fail(http.StatusForbidden, "%s may not %s in %s (holds %s): %s", c.Actor(), action, where, c.Roles(), authz.WhoMay(action))
}

func scope(tenant, project string) string {
	if project == "" {
		return "tenant " + tenant
	}
	return "project " + tenant + "/" + project
}
