// Projects and their stages (docs/controlplane.md, "Targeting"): a stage's selectors, whether it
// shares namespace targets with other projects, and its targets (environment × namespace rows,
// targeting.Targets).

package controlplane

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"

	"github.com/nexo-io/nexo-edge/contract/protocol"
	"github.com/nexo-io/nexo-edge/controlplane/authz"
	"github.com/nexo-io/nexo-edge/controlplane/storage"
	"github.com/nexo-io/nexo-edge/controlplane/targeting"
)

// createProject is POST /admin/tenants/{tenant}/projects {"name"}.
func (s *Server) createProject(w http.ResponseWriter, r *http.Request, _ authz.Caller) error {
	name, err := decodeName(r, "project", validName)
	if err != nil {
		return err
	}
	if err := s.cfg.Store.CreateProject(r.Context(), r.PathValue("tenant"), name); err != nil {
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
	// PromotesFrom names the stage this one takes revisions from (promote); a direct deploy
	// to it is then refused. SoakSeconds is how long a revision must have been Synced on every
	// environment of that stage; RequiresApproval has a project manager other than the promoter
	// approve each promotion.
	PromotesFrom     string `json:"promotesFrom,omitempty"`
	SoakSeconds      int64  `json:"soakSeconds,omitempty"`
	RequiresApproval bool   `json:"requiresApproval,omitempty"`
}

// pathProject resolves the path's project (404 otherwise).
func (s *Server) pathProject(r *http.Request) error {
	tenant, project := r.PathValue("tenant"), r.PathValue("project")
	if ok, err := s.cfg.Store.ProjectExists(r.Context(), tenant, project); err != nil {
		return err
	} else if !ok {
		return fail(http.StatusNotFound, "no project %s in tenant %s", project, tenant)
	}
	auditOf(r).target = scope(tenant, project)
	return nil
}

// setStage is PUT /admin/tenants/{tenant}/projects/{project}/stages/{stage}. A namespace
// target belongs to one project: a stage that would reach a namespace target that another
// project's stage already reaches is refused (409), unless it is marked sharedTargets, which
// takes stage.share-targets (a tenant admin).
func (s *Server) setStage(w http.ResponseWriter, r *http.Request, c authz.Caller) error {
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
	if err := s.validPromotion(r, name, req); err != nil {
		return err
	}
	if req.SharedTargets {
		// Letting a stage reach another project's namespace targets is a tenant-level decision.
		if _, err := authorize(c, authz.ShareNamespaceTargets, tenant, ""); err != nil {
			return fail(http.StatusForbidden, "%v: only a tenant admin may let a stage share namespace targets with other projects (sharedTargets)", err)
		}
	}
	st := storage.StoredStage{Stage: targeting.Stage{Project: project, Name: name, Environments: req.Environments, NamespaceTargets: req.Namespaces}, Shared: req.SharedTargets,
		Promotion: storage.Promotion{From: req.PromotesFrom, SoakSeconds: req.SoakSeconds, RequiresApproval: req.RequiresApproval}}
	if !st.Shared {
		if err := s.exclusiveTargets(r.Context(), tenant, st); err != nil {
			return err
		}
	}
	if err := s.cfg.Store.SetStage(r.Context(), tenant, st); err != nil {
		return err
	}
	auditOf(r).target = "stage " + tenant + "/" + project + "/" + name
	writeJSON(w, http.StatusOK, req)
	return nil
}

// maxSoak bounds a stage's soak time (30 days).
const maxSoak = 30 * 24 * 3600

// validPromotion refuses a promotion policy that cannot work: a stage promoting from itself,
// from a stage the project does not have, in a cycle, or with a soak time out of range.
func (s *Server) validPromotion(r *http.Request, name string, req StageSpec) error {
	if req.PromotesFrom == "" {
		if req.SoakSeconds != 0 || req.RequiresApproval {
			return fail(http.StatusBadRequest, "soakSeconds and requiresApproval apply to a stage that promotes from another (promotesFrom)")
		}
		return nil
	}
	if req.SoakSeconds < 0 || req.SoakSeconds > maxSoak {
		return fail(http.StatusBadRequest, "soakSeconds must be between 0 and %d (30 days)", maxSoak)
	}
	tenant, project := r.PathValue("tenant"), r.PathValue("project")
	from := req.PromotesFrom
	for seen := []string{name}; from != ""; {
		if slices.Contains(seen, from) {
			return fail(http.StatusBadRequest, "stage %s would promote from %s, which leads back to it (%s): promotion runs one way", name, req.PromotesFrom, strings.Join(append(seen, from), " ← "))
		}
		seen = append(seen, from)
		up, err := s.cfg.Store.Stage(r.Context(), tenant, project, from)
		if errors.Is(err, storage.ErrNotFound) {
			return fail(http.StatusBadRequest, "stage %s would promote from %s, which project %s does not have: create that stage first", name, from, project)
		} else if err != nil {
			return err
		}
		from = up.Promotion.From
	}
	return nil
}

// exclusiveTargets refuses (409) a stage that would reach a namespace target another project's
// stage reaches.
func (s *Server) exclusiveTargets(ctx context.Context, tenant string, st storage.StoredStage) error {
	envs, err := s.cfg.Store.TenantEnvironments(ctx, tenant)
	if err != nil {
		return err
	}
	stages, err := s.cfg.Store.Stages(ctx, tenant)
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
	st, err := s.cfg.Store.Stage(r.Context(), tenant, project, name)
	if errors.Is(err, storage.ErrNotFound) {
		return stagePlan{}, fail(http.StatusNotFound, "no stage %s in project %s/%s", name, tenant, project)
	} else if err != nil {
		return stagePlan{}, err
	}
	auditOf(r).target = "stage " + tenant + "/" + project + "/" + name
	envs, err := s.cfg.Store.TenantEnvironments(r.Context(), tenant)
	if err != nil {
		return stagePlan{}, err
	}
	return stagePlan{tenant: tenant, stage: st, targets: targeting.Targets(tenant, st.Stage, envs), envs: envs}, nil
}

// targets is GET /admin/tenants/{tenant}/projects/{project}/stages/{stage}/targets.
func (s *Server) targets(w http.ResponseWriter, r *http.Request, _ authz.Caller) error {
	p, err := s.stageTargets(r)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"targets": p.targets})
	return nil
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
	e, err := s.cfg.Store.Environment(r.Context(), env)
	return e, p, err
}
