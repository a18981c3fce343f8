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

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/nexo-io/nexo-edge/contract/connecttoken"
	"github.com/nexo-io/nexo-edge/contract/protocol"
	"github.com/nexo-io/nexo-edge/controlplane/targeting"
)

// caller is who sent a request.
type caller struct {
	admin     bool
	principal Principal
}

func (c caller) actor() string {
	if c.admin {
		return adminActor
	}
	return "principal:" + c.principal.Tenant + "/" + c.principal.Name
}

// authenticate reads the bearer token: the admin token, or a principal's.
func (s *Server) authenticate(r *http.Request) (caller, bool) {
	tok := bearer(r)
	if s.AdminToken != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(s.AdminToken)) == 1 {
		return caller{admin: true}, true
	}
	if tok == "" {
		return caller{}, false
	}
	p, err := s.Store.PrincipalByToken(r.Context(), tok)
	if err != nil {
		return caller{}, false
	}
	return caller{principal: p}, true
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

// tenantRoute authenticates, authorizes action in the path's tenant (and project) and audits the
// request under the caller's role: 401 without a valid token, 403 without the role, naming the
// action and what the caller holds.
func (s *Server) tenantRoute(action targeting.Action, h func(http.ResponseWriter, *http.Request, caller)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tenant, project := r.PathValue("tenant"), r.PathValue("project")
		c, ok := s.authenticate(r)
		if !ok {
			s.audited(string(action), "unknown", "none", func(w http.ResponseWriter, _ *http.Request) {
				writeError(w, http.StatusUnauthorized, "a valid admin or principal token is required")
			})(w, r)
			return
		}
		role, allowed := c.may(action, tenant, project)
		if !allowed {
			s.audited(string(action), c.actor(), c.roles(), func(w http.ResponseWriter, r *http.Request) {
				auditOf(r).target = scope(tenant, project)
				writeError(w, http.StatusForbidden, "%s may not %s in %s (holds %s): %s",
					c.actor(), action, scope(tenant, project), c.roles(), whoMay(action))
			})(w, r)
			return
		}
		s.audited(string(action), c.actor(), role, func(w http.ResponseWriter, r *http.Request) {
			if auditOf(r).target == "" {
				auditOf(r).target = scope(tenant, project)
			}
			if _, err := s.Store.TenantByID(r.Context(), tenant); errors.Is(err, ErrNotFound) {
				writeError(w, http.StatusNotFound, "no tenant %s", tenant)
				return
			}
			h(w, r, c)
		})(w, r)
	}
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

// decode reads a JSON body into v (64 KiB at most), answering 400 when it cannot.
func decode(w http.ResponseWriter, r *http.Request, v any) bool {
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16)).Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, "the body is not valid JSON: %v", err)
		return false
	}
	return true
}

// validName refuses a name that is not a DNS label (tenants, principals, projects, stages).
func validName(w http.ResponseWriter, what, name string) bool {
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
		writeError(w, http.StatusBadRequest, "%s %q: %s", what, name, strings.Join(errs, "; "))
		return false
	}
	return true
}

func (s *Server) storageError(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, ErrConflict):
		writeError(w, http.StatusConflict, "already exists")
	default:
		s.log().Error("tenancy storage", "error", err)
		writeError(w, http.StatusInternalServerError, "storage error")
	}
}

// createTenant is POST /admin/tenants {"name"}: the admin token only.
func (s *Server) createTenant(w http.ResponseWriter, r *http.Request) {
	var req struct{ Name string }
	if !decode(w, r, &req) || !validName(w, "tenant", req.Name) {
		return
	}
	if err := s.Store.CreateTenant(r.Context(), req.Name, req.Name); err != nil {
		s.storageError(w, err)
		return
	}
	auditOf(r).target = "tenant " + req.Name
	writeJSON(w, http.StatusCreated, Tenant{ID: req.Name, Name: req.Name})
}

// NewPrincipal is the answer to a principal's creation: its token is shown this once.
type NewPrincipal struct {
	Principal
	Token string `json:"token"`
}

// createPrincipal is POST /admin/tenants/{tenant}/principals {"name"}.
func (s *Server) createPrincipal(w http.ResponseWriter, r *http.Request, _ caller) {
	var req struct{ Name string }
	if !decode(w, r, &req) || !validName(w, "principal", req.Name) {
		return
	}
	tenant := r.PathValue("tenant")
	p := Principal{ID: "p-" + randomID(8), Tenant: tenant, Name: req.Name}
	token := "nexo-principal-" + randomID(24)
	if err := s.Store.CreatePrincipal(r.Context(), p.ID, tenant, p.Name, token); err != nil {
		s.storageError(w, err)
		return
	}
	auditOf(r).target = "principal " + tenant + "/" + p.Name
	writeJSON(w, http.StatusCreated, NewPrincipal{Principal: p, Token: token})
}

// bindRole is POST /admin/tenants/{tenant}/role-bindings {"principal", "role", "project"}.
func (s *Server) bindRole(w http.ResponseWriter, r *http.Request, _ caller) {
	var req struct {
		Principal string         `json:"principal"`
		Role      targeting.Role `json:"role"`
		Project   string         `json:"project"`
	}
	if !decode(w, r, &req) {
		return
	}
	tenant := r.PathValue("tenant")
	auditOf(r).target = "principal " + tenant + "/" + req.Principal
	if !slices.Contains(targeting.Roles, req.Role) {
		writeError(w, http.StatusBadRequest, "unknown role %q: one of %v", req.Role, targeting.Roles)
		return
	}
	switch {
	case req.Role == targeting.TenantAdmin && req.Project != "":
		writeError(w, http.StatusBadRequest, "tenant-admin is tenant-wide: leave project empty")
		return
	case req.Role != targeting.TenantAdmin && req.Role != targeting.Viewer && req.Project == "":
		writeError(w, http.StatusBadRequest, "%s is bound in a project: name it", req.Role)
		return
	}
	p, err := s.Store.PrincipalByName(r.Context(), tenant, req.Principal)
	if errors.Is(err, ErrNotFound) {
		writeError(w, http.StatusNotFound, "no principal %s in tenant %s", req.Principal, tenant)
		return
	} else if err != nil {
		s.storageError(w, err)
		return
	}
	if req.Project != "" {
		if ok, err := s.Store.ProjectExists(r.Context(), tenant, req.Project); err != nil || !ok {
			writeError(w, http.StatusNotFound, "no project %s in tenant %s", req.Project, tenant)
			return
		}
	}
	if err := s.Store.Bind(r.Context(), p.ID, Binding{Role: req.Role, Project: req.Project}); err != nil {
		s.storageError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, Binding{Role: req.Role, Project: req.Project})
}

// createProject is POST /admin/tenants/{tenant}/projects {"name"}.
func (s *Server) createProject(w http.ResponseWriter, r *http.Request, _ caller) {
	var req struct{ Name string }
	if !decode(w, r, &req) || !validName(w, "project", req.Name) {
		return
	}
	auditOf(r).target = scope(r.PathValue("tenant"), req.Name)
	if err := s.Store.CreateProject(r.Context(), r.PathValue("tenant"), req.Name); err != nil {
		s.storageError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]string{"tenant": r.PathValue("tenant"), "name": req.Name})
}

// StageSpec is a stage's selectors, as the API takes and shows them.
type StageSpec struct {
	Environments map[string]string `json:"environments"`
	Namespaces   map[string]string `json:"namespaces"`
}

// setStage is PUT /admin/tenants/{tenant}/projects/{project}/stages/{stage}.
func (s *Server) setStage(w http.ResponseWriter, r *http.Request, _ caller) {
	tenant, project, name := r.PathValue("tenant"), r.PathValue("project"), r.PathValue("stage")
	var req StageSpec
	if !decode(w, r, &req) || !validName(w, "stage", name) {
		return
	}
	auditOf(r).target = "stage " + tenant + "/" + project + "/" + name
	for what, sel := range map[string]map[string]string{"the environment selector": req.Environments, "the namespace selector": req.Namespaces} {
		if err := targeting.ValidateSelector(what, sel); err != nil {
			writeError(w, http.StatusBadRequest, "%v", err)
			return
		}
	}
	if ok, err := s.Store.ProjectExists(r.Context(), tenant, project); err != nil || !ok {
		writeError(w, http.StatusNotFound, "no project %s in tenant %s", project, tenant)
		return
	}
	st := targeting.Stage{Project: project, Name: name, Environments: req.Environments, NamespaceTargets: req.Namespaces}
	if err := s.Store.SetStage(r.Context(), tenant, st); err != nil {
		s.storageError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, req)
}

// createTenantEnvironment is POST /admin/tenants/{tenant}/environments {"name"}: an environment
// of the tenant, its connect token shown this once.
func (s *Server) createTenantEnvironment(w http.ResponseWriter, r *http.Request, _ caller) {
	var req struct{ Name string }
	if !decode(w, r, &req) || strings.TrimSpace(req.Name) == "" {
		writeError(w, http.StatusBadRequest, "a name is required")
		return
	}
	env, token, err := s.registerEnvironment(r.Context(), req.Name)
	if err != nil {
		s.storageError(w, err)
		return
	}
	if err := s.Store.AssignEnvironment(r.Context(), env.ID, r.PathValue("tenant")); err != nil {
		s.storageError(w, err)
		return
	}
	auditOf(r).target = env.ID
	writeJSON(w, http.StatusCreated, NewEnvironment{Environment: env, Token: token})
}

// tenantEnvironment checks that env belongs to the path's tenant: another tenant's environment
// is answered as unknown.
func (s *Server) tenantEnvironment(w http.ResponseWriter, r *http.Request) (string, bool) {
	env, tenant := r.PathValue("env"), r.PathValue("tenant")
	auditOf(r).target = env
	owner, err := s.Store.EnvironmentTenant(r.Context(), env)
	if err != nil {
		s.storageError(w, err)
		return "", false
	}
	if owner != tenant {
		writeError(w, http.StatusNotFound, "no environment %s in tenant %s", env, tenant)
		return "", false
	}
	return env, true
}

// setEnvironmentLabels is PUT /admin/tenants/{tenant}/environments/{env}/labels {"labels"}.
func (s *Server) setEnvironmentLabels(w http.ResponseWriter, r *http.Request, _ caller) {
	var req struct{ Labels map[string]string }
	if !decode(w, r, &req) {
		return
	}
	env, ok := s.tenantEnvironment(w, r)
	if !ok {
		return
	}
	if err := targeting.ValidateLabels("environment labels", req.Labels); err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	if err := s.Store.SetEnvironmentLabels(r.Context(), env, req.Labels); err != nil {
		s.storageError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, req)
}

// setNamespaceTarget is PUT /admin/tenants/{tenant}/environments/{env}/namespace-targets/{namespace}.
func (s *Server) setNamespaceTarget(w http.ResponseWriter, r *http.Request, _ caller) {
	var req struct{ Labels map[string]string }
	if !decode(w, r, &req) {
		return
	}
	env, ok := s.tenantEnvironment(w, r)
	if !ok {
		return
	}
	ns := r.PathValue("namespace")
	auditOf(r).target = env + "/" + ns
	if !validName(w, "namespace", ns) {
		return
	}
	if err := targeting.ValidateLabels("namespace target labels", req.Labels); err != nil {
		writeError(w, http.StatusBadRequest, "%v", err)
		return
	}
	if err := s.Store.SetNamespaceTarget(r.Context(), env, ns, req.Labels); err != nil {
		s.storageError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, req)
}

// stageTargets answers a stage's targets, and the tenant's environments they were decided from,
// or a 404 naming what is missing.
func (s *Server) stageTargets(w http.ResponseWriter, r *http.Request) ([]targeting.Target, []targeting.Environment, bool) {
	tenant, project, name := r.PathValue("tenant"), r.PathValue("project"), r.PathValue("stage")
	st, err := s.Store.Stage(r.Context(), tenant, project, name)
	if errors.Is(err, ErrNotFound) {
		writeError(w, http.StatusNotFound, "no stage %s in project %s/%s", name, tenant, project)
		return nil, nil, false
	} else if err != nil {
		s.storageError(w, err)
		return nil, nil, false
	}
	envs, err := s.Store.TenantEnvironments(r.Context(), tenant)
	if err != nil {
		s.storageError(w, err)
		return nil, nil, false
	}
	return targeting.Targets(tenant, st, envs), envs, true
}

// targets is GET /admin/tenants/{tenant}/projects/{project}/stages/{stage}/targets.
func (s *Server) targets(w http.ResponseWriter, r *http.Request, _ caller) {
	if t, _, ok := s.stageTargets(w, r); ok {
		writeJSON(w, http.StatusOK, map[string]any{"targets": t})
	}
}

// StageDeploy is a deploy through a project stage.
type StageDeploy struct {
	Environment string            `json:"environment"`
	Namespace   string            `json:"namespace"`
	Manifests   []json.RawMessage `json:"manifests"`
}

// stageRow finds the row of a stage's targets for env and namespace (namespace "" for a
// rollout, which is per environment), answering 404 or 409 with the reasons when a command may
// not go there; it returns the environment and the tenant's environments as targeting read them
// (labels, targets, the limits their clusters last reported). The decision is
// targeting.Targets', so the targets query and a deploy never disagree.
func (s *Server) stageRow(w http.ResponseWriter, r *http.Request, env, namespace string) (Environment, []targeting.Environment, bool) {
	targets, envs, ok := s.stageTargets(w, r)
	if !ok {
		return Environment{}, nil, false
	}
	auditOf(r).target = strings.TrimSuffix(env+"/"+namespace, "/")
	var rows []targeting.Target
	for _, t := range targets {
		if t.Environment == env {
			rows = append(rows, t)
		}
	}
	if len(rows) == 0 {
		writeError(w, http.StatusNotFound, "no environment %s in tenant %s", env, r.PathValue("tenant"))
		return Environment{}, nil, false
	}
	stage := r.PathValue("stage")
	if namespace == "" {
		// A rollout goes to an environment the stage selects (any of its targets eligible).
		if !slices.ContainsFunc(rows, func(t targeting.Target) bool { return t.Eligible }) {
			writeError(w, http.StatusConflict, "environment %s is not eligible for stage %s: %s", env, stage, strings.Join(rows[0].Reasons, "; "))
			return Environment{}, nil, false
		}
	} else {
		i := slices.IndexFunc(rows, func(t targeting.Target) bool { return t.Namespace == namespace })
		switch {
		case i < 0:
			writeError(w, http.StatusConflict, "environment %s has no namespace target %s: a tenant admin adds it (namespace-targets)", env, namespace)
			return Environment{}, nil, false
		case !rows[i].Deployable:
			writeError(w, http.StatusConflict, "%s/%s is not deployable for stage %s: %s", env, namespace, stage, strings.Join(rows[i].Reasons, "; "))
			return Environment{}, nil, false
		}
	}
	e, err := s.Store.Environment(r.Context(), env)
	if err != nil {
		s.storageError(w, err)
		return Environment{}, nil, false
	}
	return e, envs, true
}

// deployThroughStage is POST /admin/tenants/{tenant}/projects/{project}/stages/{stage}/deploy
// {"environment", "namespace", "manifests"}. In order: the caller's role (tenantRoute), the
// project's stage, the environment in the same tenant, its labels, the namespace target and its
// labels, the namespaces the cluster last reported it allows, and the tenant's license
// entitlement (entitlement.go); only then are the manifests signed and queued. The operator
// enforces the cluster's license document again in the cluster.
func (s *Server) deployThroughStage(w http.ResponseWriter, r *http.Request, _ caller) {
	var req StageDeploy
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 8<<20)).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "the body is not valid JSON: %v", err)
		return
	}
	if req.Namespace == "" {
		writeError(w, http.StatusBadRequest, "a namespace is required")
		return
	}
	env, envs, ok := s.stageRow(w, r, req.Environment, req.Namespace)
	if !ok {
		return
	}
	refusal, err := s.entitled(r.Context(), r.PathValue("tenant"), envs, req.Environment, req.Namespace, req.Manifests)
	if err != nil {
		s.storageError(w, err)
		return
	}
	if refusal != nil {
		writeError(w, http.StatusForbidden, "%v", refusal)
		return
	}
	s.queue(w, r, env, protocol.Command{Type: protocol.Deploy, Namespaces: []string{req.Namespace}, Manifests: req.Manifests})
}

// StageRollout is a rollout through a project stage.
type StageRollout struct {
	Environment string `json:"environment"`
	Image       string `json:"image"`
}

// rolloutThroughStage is POST .../stages/{stage}/rollout {"environment", "image"}: the
// environment must be eligible for the stage, and the image's repository among those its
// cluster last reported a rollout may set.
func (s *Server) rolloutThroughStage(w http.ResponseWriter, r *http.Request, _ caller) {
	var req StageRollout
	if !decode(w, r, &req) {
		return
	}
	repo, err := protocol.ImageRepository(req.Image)
	if err != nil {
		writeError(w, http.StatusBadRequest, "image %q: %v", req.Image, err)
		return
	}
	env, envs, ok := s.stageRow(w, r, req.Environment, "")
	if !ok {
		return
	}
	var limits *protocol.Limits
	if i := slices.IndexFunc(envs, func(e targeting.Environment) bool { return e.ID == env.ID }); i >= 0 {
		limits = envs[i].Limits
	}
	switch {
	case limits == nil:
		writeError(w, http.StatusConflict, "environment %s is eligible, but its cluster has not reported which image repositories a rollout may set", env.ID)
		return
	case !limits.AllowsImage(req.Image):
		writeError(w, http.StatusConflict, "eligible, refused by the cluster: %s is not among the image repositories environment %s allows (%s)", repo, env.ID, strings.Join(limits.ImageRepositories, ", "))
		return
	}
	s.queue(w, r, env, protocol.Command{Type: protocol.Rollout, Image: req.Image})
}

// StageUninstall is an uninstall through a project stage.
type StageUninstall struct {
	Environment string `json:"environment"`
	Namespace   string `json:"namespace"`
	Name        string `json:"name"`
}

// uninstallThroughStage is POST .../stages/{stage}/uninstall {"environment", "namespace",
// "name"}: one NexoProxy, in a namespace target the stage may deploy to.
func (s *Server) uninstallThroughStage(w http.ResponseWriter, r *http.Request, _ caller) {
	var req StageUninstall
	if !decode(w, r, &req) {
		return
	}
	if req.Namespace == "" || req.Name == "" {
		writeError(w, http.StatusBadRequest, "namespace and name of the NexoProxy are required")
		return
	}
	env, _, ok := s.stageRow(w, r, req.Environment, req.Namespace)
	if !ok {
		return
	}
	s.queue(w, r, env, protocol.Command{Type: protocol.Uninstall, Proxy: &protocol.ObjectRef{Namespace: req.Namespace, Name: req.Name}})
}

// registerEnvironment creates an environment and its connect token.
func (s *Server) registerEnvironment(ctx context.Context, name string) (Environment, string, error) {
	id := randomID(6) // 12 lowercase hex digits
	token, err := connecttoken.New(id)
	if err != nil {
		return Environment{}, "", fmt.Errorf("cannot issue a token: %w", err)
	}
	if err := s.Store.CreateEnvironment(ctx, id, name, connecttoken.Hash(token)); err != nil {
		return Environment{}, "", err
	}
	env, err := s.Store.Environment(ctx, id)
	s.log().Info("environment registered", "environment", id, "name", name)
	return env, token, err
}
