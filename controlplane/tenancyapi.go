// The tenancy API (docs/controlplane.md, "Targeting"): tenants, principals and their roles,
// projects and stages, environment labels and namespace targets, a stage's targets, and deploys
// through a stage. A request carries the admin token (the platform operator: every action in
// every tenant) or a principal's token (its bindings, in its own tenant); every request is
// audited with the role it acted under.

package controlplane

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/nexo-io/nexo-edge/contract/connecttoken"
	"github.com/nexo-io/nexo-edge/contract/protocol"
	"github.com/nexo-io/nexo-edge/controlplane/storage"
	"github.com/nexo-io/nexo-edge/controlplane/targeting"
)

// caller is who sent a request.
type caller struct {
	admin     bool
	principal storage.Principal
}

func (c caller) actor() string {
	if c.admin {
		return adminActor
	}
	return "principal:" + c.principal.Tenant + "/" + c.principal.Name
}

// authenticate reads the bearer token, the admin token or a principal's, and records who the
// caller is in the request's audit entry. Without a valid token it refuses (401), and the
// refusal is recorded as anonymous: no tenant, no target, rate-limited.
func (s *Server) authenticate(r *http.Request) (caller, error) {
	e := auditOf(r)
	tok := bearer(r)
	if s.AdminToken != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(s.AdminToken)) == 1 {
		e.actor, e.role = adminActor, adminRole
		return caller{admin: true}, nil
	}
	e.actor, e.role, e.anonymous = "unknown", "none", true
	if tok == "" {
		return caller{}, fail(http.StatusUnauthorized, "a valid admin or principal token is required (Authorization: Bearer TOKEN)")
	}
	p, err := s.Store.PrincipalByToken(r.Context(), tok)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return caller{}, fail(http.StatusUnauthorized, "a valid admin or principal token is required (Authorization: Bearer TOKEN)")
	case err != nil:
		return caller{}, err
	case !s.now().Before(p.TokenExpiresAt):
		return caller{}, fail(http.StatusUnauthorized, "this principal token expired at %s: a tenant admin issues a new one (controlplane principal rotate-token)", p.TokenExpiresAt.UTC().Format(time.RFC3339))
	}
	c := caller{principal: p}
	e.actor, e.role, e.tenant, e.anonymous = c.actor(), c.roles(), p.Tenant, false
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
		if !c.admin {
			return fail(http.StatusForbidden, "%s may not %s: it takes the platform's admin token", c.actor(), action)
		}
		if err := validPath(r); err != nil {
			return err
		}
		return h(w, r)
	})
}

// may returns the role under which c may take action in tenant (project: the project the
// action is in; "" for a tenant-level action). A project's role applies in that project only.
func (c caller) may(action targeting.Action, tenant, project string) (string, bool) {
	if c.admin {
		return adminRole, true
	}
	if c.principal.Tenant != tenant {
		return "", false
	}
	for _, b := range c.principal.Bindings {
		if b.Project != "" && b.Project != project {
			continue
		}
		if targeting.Can(b.Role, action) {
			return string(b.Role), true
		}
	}
	return "", false
}

// tenantAdmin reports whether c is the platform admin or a tenant admin of tenant.
func (c caller) tenantAdmin(tenant string) bool {
	return c.admin || (c.principal.Tenant == tenant && slices.Contains(c.principal.Bindings, storage.Binding{Role: targeting.TenantAdmin}))
}

// roles is a principal's bindings, for the audit of a refusal.
func (c caller) roles() string {
	if c.admin {
		return adminRole
	}
	var out []string
	for _, b := range c.principal.Bindings {
		out = append(out, string(b.Role)+"@"+orAll(b.Project))
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ",")
}

func orAll(project string) string {
	if project == "" {
		return "tenant"
	}
	return project
}

// tenantRoute authenticates, authorizes action in the path's tenant (and project) and serves
// the request audited under the caller's role: 401 without a valid token, 403 without the role
// (naming the action, what the caller holds and the roles that may), 404 for a tenant that
// does not exist (asked by the admin token: a principal is refused before, in another tenant).
func (s *Server) tenantRoute(action targeting.Action, h func(http.ResponseWriter, *http.Request, caller) error) http.HandlerFunc {
	return s.endpoint(string(action), func(w http.ResponseWriter, r *http.Request) error {
		c, err := s.authenticate(r)
		if err != nil {
			return err
		}
		if err := validPath(r); err != nil {
			return err
		}
		tenant, project := r.PathValue("tenant"), r.PathValue("project")
		role, allowed := c.may(action, tenant, project)
		if !allowed {
			where := scope(tenant, project)
			if !c.admin && c.principal.Tenant != tenant {
				where = "another tenant"
			}
			return fail(http.StatusForbidden, "%s may not %s in %s (holds %s): %s", c.actor(), action, where, c.roles(), whoMay(action))
		}
		e := auditOf(r)
		e.role = role
		if _, err := s.Store.TenantByID(r.Context(), tenant); errors.Is(err, storage.ErrNotFound) {
			return fail(http.StatusNotFound, "no tenant %s", tenant)
		} else if err != nil {
			return err
		}
		e.tenant, e.target = tenant, "tenant "+tenant
		return h(w, r, c)
	})
}

func scope(tenant, project string) string {
	if project == "" {
		return "tenant " + tenant
	}
	return "project " + tenant + "/" + project
}

// whoMay names the roles that may take action.
func whoMay(action targeting.Action) string {
	var roles []string
	for _, r := range targeting.Roles {
		if targeting.Can(r, action) {
			roles = append(roles, string(r))
		}
	}
	return "it takes one of " + strings.Join(roles, ", ")
}

// validName refuses a name that is not a DNS label (tenants, principals, projects, stages,
// namespaces).
func validName(what, name string) error {
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
		return fail(http.StatusBadRequest, "%s %q: %s", what, truncate(name, 80), strings.Join(errs, "; "))
	}
	return nil
}

// createTenant is POST /admin/tenants {"name"}: the admin token only.
func (s *Server) createTenant(w http.ResponseWriter, r *http.Request) error {
	name, err := decodeName(r, "tenant", validName)
	if err != nil {
		return err
	}
	if err := s.Store.CreateTenant(r.Context(), name, name); err != nil {
		return err
	}
	auditOf(r).tenant, auditOf(r).target = name, "tenant "+name
	writeJSON(w, http.StatusCreated, storage.Tenant{ID: name, Name: name})
	return nil
}

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
func (s *Server) listPrincipals(w http.ResponseWriter, r *http.Request, _ caller) error {
	ps, err := s.Store.Principals(r.Context(), r.PathValue("tenant"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"principals": ps})
	return nil
}

// createPrincipal is POST /admin/tenants/{tenant}/principals {"name", "expiresInSeconds"}.
func (s *Server) createPrincipal(w http.ResponseWriter, r *http.Request, _ caller) error {
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
	if err := s.Store.CreatePrincipal(r.Context(), p.ID, tenant, p.Name, token, expires); err != nil {
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
	p, err := s.Store.PrincipalByName(r.Context(), tenant, name)
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
func (s *Server) deletePrincipal(w http.ResponseWriter, r *http.Request, _ caller) error {
	p, err := s.pathPrincipal(r)
	if err != nil {
		return err
	}
	if err := s.Store.DeletePrincipal(r.Context(), p.ID); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// rotatePrincipalToken is POST /admin/tenants/{tenant}/principals/{principal}/token
// {"expiresInSeconds"} (body optional): a new token, shown once; the old one is refused from
// its next request (a leaked token has no grace).
func (s *Server) rotatePrincipalToken(w http.ResponseWriter, r *http.Request, _ caller) error {
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
	if err := s.Store.RotatePrincipalToken(r.Context(), p.ID, token, expires); err != nil {
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
		if ok, err := s.Store.ProjectExists(ctx, tenant, b.Project); err != nil {
			return err
		} else if !ok {
			return fail(http.StatusNotFound, "no project %s in tenant %s", b.Project, tenant)
		}
	}
	return nil
}

// bindRole is POST /admin/tenants/{tenant}/role-bindings {"principal", "role", "project"}.
func (s *Server) bindRole(w http.ResponseWriter, r *http.Request, _ caller) error {
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
	p, err := s.Store.PrincipalByName(r.Context(), tenant, req.Principal)
	if errors.Is(err, storage.ErrNotFound) {
		return fail(http.StatusNotFound, "no principal %s in tenant %s", req.Principal, tenant)
	} else if err != nil {
		return err
	}
	auditOf(r).target = "principal " + tenant + "/" + p.Name
	if err := s.Store.Bind(r.Context(), p.ID, b); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, b)
	return nil
}

// unbindRole is DELETE /admin/tenants/{tenant}/principals/{principal}/role-bindings/{role}
// [?project=P]: the role no longer applies from the principal's next request.
func (s *Server) unbindRole(w http.ResponseWriter, r *http.Request, _ caller) error {
	p, err := s.pathPrincipal(r)
	if err != nil {
		return err
	}
	b := storage.Binding{Role: targeting.Role(r.PathValue("role")), Project: r.URL.Query().Get("project")}
	if err := s.checkBinding(r.Context(), r.PathValue("tenant"), b); err != nil {
		return err
	}
	if err := s.Store.Unbind(r.Context(), p.ID, b); errors.Is(err, storage.ErrNotFound) {
		return fail(http.StatusNotFound, "principal %s does not hold %s in %s", p.Name, b.Role, orAll(b.Project))
	} else if err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// createProject is POST /admin/tenants/{tenant}/projects {"name"}.
func (s *Server) createProject(w http.ResponseWriter, r *http.Request, _ caller) error {
	name, err := decodeName(r, "project", validName)
	if err != nil {
		return err
	}
	if err := s.Store.CreateProject(r.Context(), r.PathValue("tenant"), name); err != nil {
		return err
	}
	auditOf(r).target = scope(r.PathValue("tenant"), name)
	writeJSON(w, http.StatusCreated, map[string]string{"tenant": r.PathValue("tenant"), "name": name})
	return nil
}

// StageSpec is a stage's selectors, as the API takes and shows them. SharedTargets lets the
// stage reach namespace targets another project's stage reaches: a tenant admin's decision.
type StageSpec struct {
	Environments  map[string]string `json:"environments"`
	Namespaces    map[string]string `json:"namespaces"`
	SharedTargets bool              `json:"sharedTargets,omitempty"`
}

// pathProject resolves the path's project (404 otherwise).
func (s *Server) pathProject(r *http.Request) error {
	tenant, project := r.PathValue("tenant"), r.PathValue("project")
	if ok, err := s.Store.ProjectExists(r.Context(), tenant, project); err != nil {
		return err
	} else if !ok {
		return fail(http.StatusNotFound, "no project %s in tenant %s", project, tenant)
	}
	auditOf(r).target = scope(tenant, project)
	return nil
}

// setStage is PUT /admin/tenants/{tenant}/projects/{project}/stages/{stage}. A namespace
// target belongs to one project: a stage that would reach one another project's stage reaches
// is refused (409), unless a tenant admin marks it sharedTargets.
func (s *Server) setStage(w http.ResponseWriter, r *http.Request, c caller) error {
	tenant, project, name := r.PathValue("tenant"), r.PathValue("project"), r.PathValue("stage")
	var req StageSpec
	if err := decode(r, &req, smallBody); err != nil {
		return err
	}
	if err := validName("stage", name); err != nil {
		return err
	}
	for _, sel := range []struct {
		what string
		sel  map[string]string
	}{{"the environment selector", req.Environments}, {"the namespace selector", req.Namespaces}} {
		if err := targeting.ValidateSelector(sel.what, sel.sel); err != nil {
			return fail(http.StatusBadRequest, "%v", err)
		}
	}
	if err := s.pathProject(r); err != nil {
		return err
	}
	if req.SharedTargets && !c.tenantAdmin(tenant) {
		return fail(http.StatusForbidden, "only a tenant admin may let a stage share namespace targets with other projects (sharedTargets)")
	}
	st := storage.StoredStage{Stage: targeting.Stage{Project: project, Name: name, Environments: req.Environments, NamespaceTargets: req.Namespaces}, Shared: req.SharedTargets}
	if !st.Shared {
		if err := s.exclusiveTargets(r.Context(), tenant, st); err != nil {
			return err
		}
	}
	if err := s.Store.SetStage(r.Context(), tenant, st); err != nil {
		return err
	}
	auditOf(r).target = "stage " + tenant + "/" + project + "/" + name
	writeJSON(w, http.StatusOK, req)
	return nil
}

// exclusiveTargets refuses (409) a stage that would reach a namespace target another project's
// stage reaches.
func (s *Server) exclusiveTargets(ctx context.Context, tenant string, st storage.StoredStage) error {
	envs, err := s.Store.TenantEnvironments(ctx, tenant)
	if err != nil {
		return err
	}
	stages, err := s.Store.Stages(ctx, tenant)
	if err != nil {
		return err
	}
	mine := map[string]bool{}
	for _, t := range targeting.Targets(tenant, st.Stage, envs) {
		if t.Eligible {
			mine[t.Environment+"/"+t.Namespace] = true
		}
	}
	for _, other := range stages {
		if other.Project == st.Project {
			continue
		}
		for _, t := range targeting.Targets(tenant, other.Stage, envs) {
			if t.Eligible && mine[t.Environment+"/"+t.Namespace] {
				return fail(http.StatusConflict, "stage %s/%s would reach %s/%s, which project %s's stage %s reaches: a namespace target belongs to one project; narrow the selectors, or a tenant admin sets sharedTargets",
					st.Project, st.Name, t.Environment, t.Namespace, other.Project, other.Name)
			}
		}
	}
	return nil
}

// createTenantEnvironment is POST /admin/tenants/{tenant}/environments {"name"}: an environment
// of the tenant, its connect token shown this once.
func (s *Server) createTenantEnvironment(w http.ResponseWriter, r *http.Request, _ caller) error {
	name, err := decodeName(r, "environment", validDisplayName)
	if err != nil {
		return err
	}
	env, token, err := s.registerEnvironment(r.Context(), name)
	if err != nil {
		return err
	}
	if err := s.Store.AssignEnvironment(r.Context(), env.ID, r.PathValue("tenant")); err != nil {
		return err
	}
	auditOf(r).target = env.ID
	writeJSON(w, http.StatusCreated, NewEnvironment{Environment: env, Token: token})
	return nil
}

// tenantEnvironment resolves the path's environment in the path's tenant: another tenant's
// environment is answered as unknown (404).
func (s *Server) tenantEnvironment(r *http.Request) (string, error) {
	env, tenant := r.PathValue("env"), r.PathValue("tenant")
	owner, err := s.Store.EnvironmentTenant(r.Context(), env)
	if err != nil {
		return "", err
	}
	if owner != tenant {
		return "", fail(http.StatusNotFound, "no environment %s in tenant %s", env, tenant)
	}
	auditOf(r).target = env
	return env, nil
}

// rotateTenantToken is POST /admin/tenants/{tenant}/environments/{env}/token {"graceSeconds"}
// (body optional): the tenant admin's connect-token rotation, with the same grace as the admin
// token's (adminapi.go).
func (s *Server) rotateTenantToken(w http.ResponseWriter, r *http.Request, _ caller) error {
	id, err := s.tenantEnvironment(r)
	if err != nil {
		return err
	}
	env, err := s.Store.Environment(r.Context(), id)
	if err != nil {
		return err
	}
	return s.rotate(w, r, env)
}

// labelsRequest is the body that sets labels.
type labelsRequest struct {
	Labels map[string]string `json:"labels"`
}

// environmentLabels reads a {"labels"} body for the path's environment of the tenant, and
// checks the labels (what names them in a refusal).
func (s *Server) environmentLabels(r *http.Request, what string) (string, labelsRequest, error) {
	var req labelsRequest
	if err := decode(r, &req, smallBody); err != nil {
		return "", req, err
	}
	env, err := s.tenantEnvironment(r)
	if err != nil {
		return "", req, err
	}
	if err := targeting.ValidateLabels(what, req.Labels); err != nil {
		return "", req, fail(http.StatusBadRequest, "%v", err)
	}
	return env, req, nil
}

// setEnvironmentLabels is PUT /admin/tenants/{tenant}/environments/{env}/labels {"labels"}.
func (s *Server) setEnvironmentLabels(w http.ResponseWriter, r *http.Request, _ caller) error {
	env, req, err := s.environmentLabels(r, "environment labels")
	if err != nil {
		return err
	}
	if err := s.Store.SetEnvironmentLabels(r.Context(), env, req.Labels); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, req)
	return nil
}

// setNamespaceTarget is PUT /admin/tenants/{tenant}/environments/{env}/namespace-targets/{namespace}.
func (s *Server) setNamespaceTarget(w http.ResponseWriter, r *http.Request, _ caller) error {
	ns := r.PathValue("namespace")
	if err := validName("namespace", ns); err != nil {
		return err
	}
	env, req, err := s.environmentLabels(r, "namespace target labels")
	if err != nil {
		return err
	}
	if err := s.Store.SetNamespaceTarget(r.Context(), env, ns, req.Labels); err != nil {
		return err
	}
	auditOf(r).target = env + "/" + ns
	writeJSON(w, http.StatusOK, req)
	return nil
}

// stagePlan is a stage and what its checks read: its targets, and the tenant's environments
// they were decided from (labels, namespace targets, the limits their clusters last reported).
type stagePlan struct {
	tenant  string
	stage   storage.StoredStage
	targets []targeting.Target
	envs    []targeting.Environment
}

// origin is where a command through the stage comes from.
func (p stagePlan) origin() storage.Origin {
	return storage.Origin{Project: p.stage.Project, Stage: p.stage.Name}
}

// deployable lists env's namespaces the stage may deploy to now.
func (p stagePlan) deployable(env string) []string {
	var out []string
	for _, t := range p.targets {
		if t.Environment == env && t.Deployable {
			out = append(out, t.Namespace)
		}
	}
	return out
}

// limits are env's cluster limits as last reported (nil: none).
func (p stagePlan) limits(env string) *protocol.Limits {
	if i := slices.IndexFunc(p.envs, func(e targeting.Environment) bool { return e.ID == env }); i >= 0 {
		return p.envs[i].Limits
	}
	return nil
}

// stageTargets reads the path's stage and decides its targets (404 naming what is missing).
func (s *Server) stageTargets(r *http.Request) (stagePlan, error) {
	tenant, project, name := r.PathValue("tenant"), r.PathValue("project"), r.PathValue("stage")
	st, err := s.Store.Stage(r.Context(), tenant, project, name)
	if errors.Is(err, storage.ErrNotFound) {
		return stagePlan{}, fail(http.StatusNotFound, "no stage %s in project %s/%s", name, tenant, project)
	} else if err != nil {
		return stagePlan{}, err
	}
	auditOf(r).target = "stage " + tenant + "/" + project + "/" + name
	envs, err := s.Store.TenantEnvironments(r.Context(), tenant)
	if err != nil {
		return stagePlan{}, err
	}
	return stagePlan{tenant: tenant, stage: st, targets: targeting.Targets(tenant, st.Stage, envs), envs: envs}, nil
}

// targets is GET /admin/tenants/{tenant}/projects/{project}/stages/{stage}/targets.
func (s *Server) targets(w http.ResponseWriter, r *http.Request, _ caller) error {
	p, err := s.stageTargets(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"targets": p.targets})
	return nil
}

// StageDeploy is a deploy through a project stage.
type StageDeploy struct {
	Environment string            `json:"environment"`
	Namespace   string            `json:"namespace"`
	Manifests   []json.RawMessage `json:"manifests"`
}

// stageRow decides whether a command through the path's stage may go to env and namespace
// (namespace "" for a rollout, which is per environment): 404 or 409 with the reasons when not.
// It returns the environment and the stage's plan. The decision is targeting.Targets', so the
// targets query and a deploy never disagree.
func (s *Server) stageRow(r *http.Request, env, namespace string) (storage.Environment, stagePlan, error) {
	p, err := s.stageTargets(r)
	if err != nil {
		return storage.Environment{}, p, err
	}
	var rows []targeting.Target
	for _, t := range p.targets {
		if t.Environment == env {
			rows = append(rows, t)
		}
	}
	if len(rows) == 0 {
		return storage.Environment{}, p, fail(http.StatusNotFound, "no environment %s in tenant %s", truncate(env, 40), r.PathValue("tenant"))
	}
	auditOf(r).target = strings.TrimSuffix(env+"/"+namespace, "/")
	stage := r.PathValue("stage")
	if namespace == "" {
		// A rollout goes to an environment the stage selects (any of its targets eligible).
		if !slices.ContainsFunc(rows, func(t targeting.Target) bool { return t.Eligible }) {
			return storage.Environment{}, p, fail(http.StatusConflict, "environment %s is not eligible for stage %s: %s", env, stage, strings.Join(rows[0].Reasons, "; "))
		}
	} else {
		i := slices.IndexFunc(rows, func(t targeting.Target) bool { return t.Namespace == namespace })
		switch {
		case i < 0:
			auditOf(r).target = env
			return storage.Environment{}, p, fail(http.StatusConflict, "environment %s has no namespace target %s: a tenant admin adds it (namespace-targets)", env, namespace)
		case !rows[i].Deployable:
			return storage.Environment{}, p, fail(http.StatusConflict, "%s/%s is not deployable for stage %s: %s", env, namespace, stage, strings.Join(rows[i].Reasons, "; "))
		}
	}
	e, err := s.Store.Environment(r.Context(), env)
	return e, p, err
}

// ownedByProject refuses (409) objects of a command through a stage that the deployed set holds
// for another project, or for the admin token's commands: a project replaces only its own.
func (s *Server) ownedByProject(ctx context.Context, envID string, p stagePlan, objs []*unstructured.Unstructured) error {
	for _, u := range objs {
		o, deployed, err := s.Store.DesiredOrigin(ctx, envID, u.GetKind(), u.GetNamespace(), u.GetName())
		if err != nil {
			return err
		}
		if deployed && o.Project != p.stage.Project {
			return fail(http.StatusConflict, "%s %s/%s in environment %s belongs to %s: project %s may not replace it",
				u.GetKind(), u.GetNamespace(), u.GetName(), envID, ownerName(o), p.stage.Project)
		}
	}
	return nil
}

func ownerName(o storage.Origin) string {
	if o.Project == "" {
		return "the platform admin (deployed outside any project)"
	}
	return "project " + o.Project
}

// deployThroughStage is POST /admin/tenants/{tenant}/projects/{project}/stages/{stage}/deploy
// {"environment", "namespace", "manifests"}. In order: the caller's role (tenantRoute), the
// project's stage, the environment in the same tenant, its labels, the namespace target and its
// labels, the namespaces the cluster last reported it allows, the manifests (decoded once: what
// is checked, counted and signed is one object), no object another project deployed, and the
// tenant's license entitlement (entitlement.go). Only then are the manifests signed and queued,
// in the same transaction as every check.
func (s *Server) deployThroughStage(w http.ResponseWriter, r *http.Request, _ caller) error {
	var req StageDeploy
	if err := decode(r, &req, manifestBody); err != nil {
		return err
	}
	if err := validName("namespace", req.Namespace); err != nil {
		return err
	}
	env, plan, err := s.stageRow(r, req.Environment, req.Namespace)
	if err != nil {
		return err
	}
	c := protocol.Command{Type: protocol.Deploy, Namespaces: []string{req.Namespace}, Manifests: req.Manifests}
	return s.submit(w, r, commandRequest{env: env, cmd: c, stage: &plan})
}

// StageRollout is a rollout through a project stage.
type StageRollout struct {
	Environment string `json:"environment"`
	Image       string `json:"image"`
}

// rolloutThroughStage is POST .../stages/{stage}/rollout {"environment", "image"}: the
// environment must be eligible for the stage, and the image's repository among those its
// cluster last reported a rollout may set. It re-signs the project's own NexoProxies in the
// namespace targets the stage may deploy to, and nothing else.
func (s *Server) rolloutThroughStage(w http.ResponseWriter, r *http.Request, _ caller) error {
	var req StageRollout
	if err := decode(r, &req, smallBody); err != nil {
		return err
	}
	repo, err := protocol.ImageRepository(req.Image)
	if err != nil {
		return fail(http.StatusBadRequest, "image %q: %v", truncate(req.Image, 200), err)
	}
	env, plan, err := s.stageRow(r, req.Environment, "")
	if err != nil {
		return err
	}
	switch limits := plan.limits(env.ID); {
	case limits == nil:
		return fail(http.StatusConflict, "environment %s is eligible, but its cluster has not reported which image repositories a rollout may set", env.ID)
	case !limits.AllowsImage(req.Image):
		return fail(http.StatusConflict, "eligible, refused by the cluster: %s is not among the image repositories environment %s allows (%s)", repo, env.ID, strings.Join(limits.ImageRepositories, ", "))
	}
	c := protocol.Command{Type: protocol.Rollout, Image: req.Image}
	return s.submit(w, r, commandRequest{env: env, cmd: c, stage: &plan})
}

// StageUninstall is an uninstall through a project stage.
type StageUninstall struct {
	Environment string `json:"environment"`
	Namespace   string `json:"namespace"`
	Name        string `json:"name"`
}

// uninstallThroughStage is POST .../stages/{stage}/uninstall {"environment", "namespace",
// "name"}: one NexoProxy of the project's own, in a namespace target the stage may deploy to.
func (s *Server) uninstallThroughStage(w http.ResponseWriter, r *http.Request, _ caller) error {
	var req StageUninstall
	if err := decode(r, &req, smallBody); err != nil {
		return err
	}
	if err := validName("namespace", req.Namespace); err != nil {
		return err
	}
	if errs := validation.IsDNS1123Subdomain(req.Name); len(errs) > 0 {
		return fail(http.StatusBadRequest, "the NexoProxy's name is not a name: %s", strings.Join(errs, "; "))
	}
	env, plan, err := s.stageRow(r, req.Environment, req.Namespace)
	if err != nil {
		return err
	}
	c := protocol.Command{Type: protocol.Uninstall, Proxy: &protocol.ObjectRef{Namespace: req.Namespace, Name: req.Name}}
	return s.submit(w, r, commandRequest{env: env, cmd: c, stage: &plan})
}

// registerEnvironment creates an environment and its connect token.
func (s *Server) registerEnvironment(ctx context.Context, name string) (storage.Environment, string, error) {
	id := randomID(6) // 12 lowercase hex digits
	token, err := connecttoken.New(id)
	if err != nil {
		return storage.Environment{}, "", fmt.Errorf("cannot issue a token: %w", err)
	}
	if err := s.Store.CreateEnvironment(ctx, id, name, connecttoken.Hash(token)); err != nil {
		return storage.Environment{}, "", err
	}
	env, err := s.Store.Environment(ctx, id)
	s.log().Info("environment registered", "environment", id)
	return env, token, err
}
