// The change lifecycle through a project's stages (docs/controlplane.md, "Change management"):
// a deploy names a revision (raw manifests become one), a preview asks the environment's
// Manager what a revision would do, a rollback deploys a revision that ran there before again
// under a new signature revision, and a promotion takes a revision from the upstream stage once
// it has been Synced on every target there for the soak time (and approved, where required).
// Every one of them queues through place (commands.go): one prepare → check → queue path.

package controlplane

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/nexo-io/nexo-edge/contract/protocol"
	"github.com/nexo-io/nexo-edge/controlplane/authz"
	"github.com/nexo-io/nexo-edge/controlplane/storage"
	"github.com/nexo-io/nexo-edge/controlplane/targeting"
)

// StageDeploy is a deploy through a project stage: a revision of the project, or (as older
// clients send it) raw manifests into one namespace, which are recorded as a new revision first.
type StageDeploy struct {
	Environment string            `json:"environment"`
	Revision    int64             `json:"revision,omitempty"`
	Namespace   string            `json:"namespace,omitempty"`
	Manifests   []json.RawMessage `json:"manifests,omitempty"`
	// Message describes the revision raw manifests become.
	Message string `json:"message,omitempty"`
	// OverrideCompatibility deploys where the environment does not report the promotion
	// contract (a project manager or tenant admin only; audited).
	OverrideCompatibility bool `json:"overrideCompatibility,omitempty"`
}

// DeployAnswer is what a deploy through a stage answers.
type DeployAnswer struct {
	ID       string `json:"id"`
	Revision int64  `json:"revision"`
	// Preview is the last answered preview of the same revision in the environment, if any,
	// and whether the environment changed since (another change applied, or its proxies'
	// inventory moved), so what it predicted may no longer hold.
	Preview *PreviewStaleness `json:"preview,omitempty"`
}

// PreviewStaleness says whether a preview still describes its environment.
type PreviewStaleness struct {
	ID                 string `json:"id"`
	EnvironmentChanged bool   `json:"environmentChanged"`
}

// deployThroughStage is POST /admin/tenants/{tenant}/projects/{project}/stages/{stage}/deploy
// {"environment", "revision"} or {"environment", "namespace", "manifests", "message"}. In order:
// the caller's role (tenantRoute), the stage and the environment's eligibility, the namespaces
// (each a deployable target of the stage there), the revision (raw manifests are checked as
// before and recorded as the project's next revision), then place's checks: freezes, ownership,
// the entitlement and compatibility. A stage that takes its revisions by promotion refuses a
// direct deploy.
func (s *Server) deployThroughStage(w http.ResponseWriter, r *http.Request, c authz.Caller) error {
	var req StageDeploy
	if err := decode(r, &req, manifestBody); err != nil {
		return err
	}
	if err := mayOverride(r, c, req.OverrideCompatibility); err != nil {
		return err
	}
	var rev storage.Revision
	var plan stagePlan
	var env storage.Environment
	var err error
	switch {
	case req.Revision != 0 && (len(req.Manifests) > 0 || req.Namespace != ""):
		return fail(http.StatusBadRequest, "a deploy names a revision or carries manifests (with their namespace), not both")
	case req.Revision == 0:
		if err := validName("namespace", req.Namespace); err != nil {
			return err
		}
		if env, plan, err = s.stageRow(r, req.Environment, req.Namespace); err != nil {
			return err
		}
		legacy := commandRequest{env: env, cmd: protocol.Command{Type: protocol.Deploy, Namespaces: []string{req.Namespace}, Manifests: req.Manifests}, stage: &plan}
		if _, err := prepareDeploy(s, r.Context(), &legacy); err != nil {
			return err
		}
		if err := refuseDirect(plan); err != nil {
			return err
		}
		message := req.Message
		if message == "" {
			message = fmt.Sprintf("deployed through stage %s to %s/%s", plan.stage.Name, env.ID, req.Namespace)
		}
		if rev, err = s.newRevision(r, c, message, req.Manifests); err != nil {
			return err
		}
	default:
		if env, plan, err = s.stageRow(r, req.Environment, ""); err != nil {
			return err
		}
		if err := refuseDirect(plan); err != nil {
			return err
		}
		if rev, err = s.projectRevision(r, req.Revision); err != nil {
			return err
		}
	}
	id, err := s.queueRevision(r, c, plan, env, rev, protocol.Deploy, storage.ViaDeploy, "", req.OverrideCompatibility)
	if err != nil {
		return err
	}
	answer := DeployAnswer{ID: id, Revision: rev.Number}
	if answer.Preview, err = s.previewStaleness(r.Context(), plan, env.ID, rev.Number); err != nil {
		return err
	}
	auditOf(r).commandID = id
	writeJSON(w, http.StatusCreated, answer)
	return nil
}

// revisionThroughStage reads what a request naming a revision through the path's stage needs,
// in the order every such request checks it: may the caller override compatibility (if it
// asks), is the environment eligible for the stage, does the project have the revision.
func (s *Server) revisionThroughStage(r *http.Request, c authz.Caller, envID string, n int64, override bool) (storage.Environment, stagePlan, storage.Revision, error) {
	if err := mayOverride(r, c, override); err != nil {
		return storage.Environment{}, stagePlan{}, storage.Revision{}, err
	}
	env, plan, err := s.stageRow(r, envID, "")
	if err != nil {
		return env, plan, storage.Revision{}, err
	}
	rev, err := s.projectRevision(r, n)
	return env, plan, rev, err
}

// mayOverride refuses (403) a request asking to override compatibility from a caller who may
// not, whether or not the environment's compatibility turns out to be unknown.
func mayOverride(r *http.Request, c authz.Caller, override bool) error {
	if !override {
		return nil
	}
	_, err := authorize(c, authz.OverrideCompatibility, r.PathValue("tenant"), r.PathValue("project"))
	return err
}

// refuseDirect refuses a direct deploy through a stage that takes its revisions by promotion.
func refuseDirect(p stagePlan) error {
	if from := p.stage.Promotion.From; from != "" {
		return fail(http.StatusConflict, "stage %s takes its revisions by promotion from stage %s: promote the revision (POST .../stages/%s/promote), or roll back to one that ran there", p.stage.Name, from, p.stage.Name)
	}
	return nil
}

// previewStaleness is the last answered preview of rev in env and whether env changed since.
func (s *Server) previewStaleness(ctx context.Context, p stagePlan, env string, rev int64) (*PreviewStaleness, error) {
	pr, err := s.cfg.Store.LatestPreview(ctx, p.tenant, p.stage.Project, env, rev)
	if errors.Is(err, storage.ErrNotFound) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	changed, err := s.changedSince(ctx, pr)
	return &PreviewStaleness{ID: pr.ID, EnvironmentChanged: changed}, err
}

// changedSince reports whether the preview's environment changed after it was queued: another
// change applied there, or its inventory is not the one it was previewed against.
func (s *Server) changedSince(ctx context.Context, pr storage.PreviewRecord) (bool, error) {
	digest, err := s.cfg.Store.InventoryDigest(ctx, pr.Environment)
	if err != nil || digest != pr.InventoryDigest {
		return true, err
	}
	return s.cfg.Store.ChangedSince(ctx, pr.Environment, pr.Seq, protocol.Preview)
}

// queueRevision queues a command of type kind (deploy or preview) carrying rev to env through
// the stage.
func (s *Server) queueRevision(r *http.Request, c authz.Caller, p stagePlan, env storage.Environment, rev storage.Revision, kind, via, promotionID string, override bool) (string, error) {
	cmd, err := revisionCommand(rev, kind)
	if err != nil {
		return "", err
	}
	return s.queueRevisionCommand(r, c, p, env, rev, cmd, via, promotionID, override)
}

// revisionCommand is a command of type kind carrying rev's manifests into their namespaces;
// one serves every environment of a promotion (place signs a copy per environment).
func revisionCommand(rev storage.Revision, kind string) (protocol.Command, error) {
	objs, err := revisionObjects(rev)
	if err != nil {
		return protocol.Command{}, err
	}
	cmd := protocol.Command{Type: kind}
	for _, u := range objs {
		raw, err := u.MarshalJSON()
		if err != nil {
			return cmd, err
		}
		cmd.Manifests = append(cmd.Manifests, raw)
		if !slices.Contains(cmd.Namespaces, u.GetNamespace()) {
			cmd.Namespaces = append(cmd.Namespaces, u.GetNamespace())
		}
	}
	sort.Strings(cmd.Namespaces)
	return cmd, nil
}

// queueRevisionCommand queues cmd (revisionCommand's) to env through the stage: every namespace
// of the revision must be a namespace target the stage may deploy to in env.
func (s *Server) queueRevisionCommand(r *http.Request, c authz.Caller, p stagePlan, env storage.Environment, rev storage.Revision, cmd protocol.Command, via, promotionID string, override bool) (string, error) {
	for _, ns := range cmd.Namespaces {
		if err := p.refuseNamespace(env.ID, ns); err != nil {
			return "", fail(http.StatusConflict, "revision %d: %v; nothing was queued", rev.Number, err)
		}
	}
	return s.place(r, commandRequest{env: env, cmd: cmd, stage: &p, revision: &rev, via: via, promotionID: promotionID, caller: c, override: override})
}

// refuseNamespace says why the stage may not deploy to env's namespace ns (nil when it may),
// as stageRow decides it.
func (p stagePlan) refuseNamespace(env, ns string) error {
	i := slices.IndexFunc(p.targets, func(t targeting.Target) bool { return t.Environment == env && t.Namespace == ns })
	switch {
	case i < 0:
		return fmt.Errorf("environment %s has no namespace target %s: a tenant admin adds it (namespace-targets)", env, ns)
	case !p.targets[i].Deployable:
		return fmt.Errorf("%s/%s is not deployable for stage %s: %s", env, ns, p.stage.Name, strings.Join(p.targets[i].Reasons, "; "))
	}
	return nil
}

// recordChange records what a command queued through a stage with a revision is: a preview
// (kept with the environment's inventory digest) or one of the stage's deployments.
func (s *Server) recordChange(r *http.Request, req commandRequest, id string) error {
	if req.revision == nil || req.stage == nil {
		return nil
	}
	p := req.stage
	if req.cmd.Type == protocol.Preview {
		digest, err := s.cfg.Store.InventoryDigest(r.Context(), req.env.ID)
		if err != nil {
			return err
		}
		return s.cfg.Store.RecordPreview(r.Context(), storage.PreviewRecord{ID: id, Tenant: p.tenant, Project: p.stage.Project, Stage: p.stage.Name,
			Environment: req.env.ID, Revision: req.revision.Number, InventoryDigest: digest})
	}
	return s.cfg.Store.RecordStageDeployment(r.Context(), storage.StageDeployment{Tenant: p.tenant, Project: p.stage.Project, Stage: p.stage.Name,
		Environment: req.env.ID, Revision: req.revision.Number, CommandID: id, Via: req.via, PromotionID: req.promotionID})
}

// StagePreview asks an environment what deploying a revision through the stage would do.
type StagePreview struct {
	Environment           string `json:"environment"`
	Revision              int64  `json:"revision"`
	OverrideCompatibility bool   `json:"overrideCompatibility,omitempty"`
}

// previewThroughStage is POST .../stages/{stage}/preview {"environment", "revision"}: the same
// checks as a deploy of the revision (but freezes, and a stage that takes revisions by
// promotion may be previewed), queued as a preview command that changes nothing, counts against
// nothing and enters no deployed set. The answer arrives with the Manager's acknowledgement:
// GET .../projects/{project}/previews/{id}.
func (s *Server) previewThroughStage(w http.ResponseWriter, r *http.Request, c authz.Caller) error {
	var req StagePreview
	if err := decode(r, &req, smallBody); err != nil {
		return err
	}
	env, plan, rev, err := s.revisionThroughStage(r, c, req.Environment, req.Revision, req.OverrideCompatibility)
	if err != nil {
		return err
	}
	id, err := s.queueRevision(r, c, plan, env, rev, protocol.Preview, "", "", req.OverrideCompatibility)
	if err != nil {
		return err
	}
	auditOf(r).commandID = id
	writeJSON(w, http.StatusCreated, map[string]any{"id": id, "revision": rev.Number})
	return nil
}

// PreviewView is a preview and, once its Manager answered, what it found.
type PreviewView struct {
	storage.PreviewRecord
	Result *protocol.PreviewResult `json:"result,omitempty"`
	// EnvironmentChanged: another change applied in the environment, or its inventory moved,
	// after the preview was queued.
	EnvironmentChanged bool `json:"environmentChanged"`
}

// showPreview is GET .../projects/{project}/previews/{id}.
func (s *Server) showPreview(w http.ResponseWriter, r *http.Request, _ authz.Caller) error {
	if err := s.pathProject(r); err != nil {
		return err
	}
	pr, err := s.cfg.Store.PreviewByID(r.Context(), r.PathValue("tenant"), r.PathValue("project"), r.PathValue("id"))
	if errors.Is(err, storage.ErrNotFound) {
		return fail(http.StatusNotFound, "project %s has no preview %s", r.PathValue("project"), r.PathValue("id"))
	} else if err != nil {
		return err
	}
	view := PreviewView{PreviewRecord: pr}
	if view.Result, err = s.commandResult(r.Context(), pr.ID); err != nil {
		return err
	}
	if view.EnvironmentChanged, err = s.changedSince(r.Context(), pr); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, view)
	return nil
}

// commandResult is what a command's acknowledgement brought back (nil when nothing).
func (s *Server) commandResult(ctx context.Context, id string) (*protocol.PreviewResult, error) {
	body, err := s.cfg.Store.CommandResult(ctx, id)
	if err != nil || body == "" {
		return nil, err
	}
	var res protocol.PreviewResult
	if err := json.Unmarshal([]byte(body), &res); err != nil {
		return nil, fmt.Errorf("stored result of %s: %w", id, err)
	}
	return &res, nil
}

// StageRollback deploys a revision that ran in the environment before.
type StageRollback struct {
	Environment           string `json:"environment"`
	To                    int64  `json:"to"`
	OverrideCompatibility bool   `json:"overrideCompatibility,omitempty"`
}

// rollbackThroughStage is POST .../stages/{stage}/rollback {"environment", "to"}: revision "to"
// must have been applied in the environment before; it is deployed again, signed at a new,
// higher signature revision (the Manager's replay guard still refuses an old signed copy).
// Preview it like any deploy (preview {"revision": to}).
func (s *Server) rollbackThroughStage(w http.ResponseWriter, r *http.Request, c authz.Caller) error {
	var req StageRollback
	if err := decode(r, &req, smallBody); err != nil {
		return err
	}
	env, plan, rev, err := s.revisionThroughStage(r, c, req.Environment, req.To, req.OverrideCompatibility)
	if err != nil {
		return err
	}
	ran, err := s.cfg.Store.RevisionApplied(r.Context(), plan.tenant, plan.stage.Project, env.ID, rev.Number)
	if err != nil {
		return err
	}
	if !ran {
		return fail(http.StatusConflict, "revision %d of project %s never ran in environment %s (no deploy of it there was applied), so there is nothing to return to; deploy it instead", rev.Number, plan.stage.Project, env.ID)
	}
	id, err := s.queueRevision(r, c, plan, env, rev, protocol.Deploy, storage.ViaRollback, "", req.OverrideCompatibility)
	if err != nil {
		return err
	}
	auditOf(r).commandID = id
	auditOf(r).reason = fmt.Sprintf("rollback of %s to revision %d", env.ID, rev.Number)
	writeJSON(w, http.StatusCreated, DeployAnswer{ID: id, Revision: rev.Number})
	return nil
}

// Run states of a revision in a stage's environment.
const (
	RunPending     = "Pending"     // queued, not yet applied
	RunFailed      = "Failed"      // its Manager refused it, or it was dead-lettered
	RunProgressing = "Progressing" // applied; a proxy is not yet on the revision it was predicted to run
	RunSynced      = "Synced"      // every proxy runs its predicted graph revision, rolled out and Ready
	RunDegraded    = "Degraded"    // a proxy is Degraded or Failed, or the operator refused its graph
)

// StageRun is a stage's revision in one environment (the one desired there) and how it runs.
type StageRun struct {
	storage.StageDeployment
	State string `json:"state"`
	// Running is the last revision the stage deployed there that was Synced (the desired one
	// once it is; 0 when none ever was).
	Running int64      `json:"running"`
	Proxies []ProxyRun `json:"proxies,omitempty"`
}

// ProxyRun is one proxy of the revision: the graph revision the deploy predicted and what the
// environment's inventory reports.
type ProxyRun struct {
	Namespace         string `json:"namespace"`
	Name              string `json:"name"`
	Predicted         string `json:"predicted,omitempty"`
	GraphRevision     string `json:"graphRevision,omitempty"`
	AvailableRevision string `json:"availableRevision,omitempty"`
	Phase             string `json:"phase,omitempty"`
}

// run computes how a stage deployment runs, from its command's state, the prediction its
// acknowledgement carried and the environment's inventory.
func (s *Server) run(ctx context.Context, d storage.StageDeployment, inventory map[protocol.ObjectRef]protocol.Deployment) (StageRun, error) {
	out := StageRun{StageDeployment: d}
	switch {
	case d.Command.Open():
		out.State = RunPending
		return out, nil
	case d.Command != storage.CommandApplied:
		out.State = RunFailed
		return out, nil
	}
	proxies, err := s.proxiesOf(ctx, d.Tenant, d.Project, d.Revision)
	if err != nil {
		return out, err
	}
	// What the deploy predicted, superseded per proxy by what a later command that moved it
	// (a rollout re-signing it, another deploy) predicted: what the proxy should run now.
	predicted := map[protocol.ObjectRef]protocol.ProxyPreview{}
	bodies, err := s.cfg.Store.ResultsSince(ctx, d.Environment, d.CommandID, movingTypes())
	if err != nil {
		return out, err
	}
	for _, body := range bodies {
		var res protocol.PreviewResult
		if err := json.Unmarshal([]byte(body), &res); err != nil {
			return out, fmt.Errorf("stored result after %s: %w", d.CommandID, err)
		}
		for _, p := range res.Proxies {
			predicted[protocol.ObjectRef{Namespace: p.Namespace, Name: p.Name}] = p
		}
	}
	out.State = RunSynced
	worse := func(state string) {
		rank := map[string]int{RunSynced: 0, RunProgressing: 1, RunDegraded: 2}
		if rank[state] > rank[out.State] {
			out.State = state
		}
	}
	for _, ref := range proxies {
		pr := ProxyRun{Namespace: ref.Namespace, Name: ref.Name}
		want, hasPrediction := predicted[ref]
		pr.Predicted = want.After
		inv, reported := inventory[ref]
		pr.GraphRevision, pr.AvailableRevision, pr.Phase = inv.GraphRevision, inv.AvailableRevision, inv.Phase
		switch {
		case hasPrediction && want.Outcome == protocol.ProxyRefused:
			worse(RunDegraded)
		case !reported:
			worse(RunProgressing)
		case inv.Phase == "Degraded" || inv.Phase == "Failed":
			worse(RunDegraded)
		case hasPrediction && (inv.GraphRevision != want.After || inv.AvailableRevision != want.After):
			worse(RunProgressing)
		case inv.GraphRevision == "" || inv.AvailableRevision != inv.GraphRevision || inv.Phase != "Ready":
			worse(RunProgressing)
		}
		out.Proxies = append(out.Proxies, pr)
	}
	return out, nil
}

type revisionKey struct {
	tenant, project string
	number          int64
}

// proxiesOf are the NexoProxies of a revision, read once per server (revisions never change).
func (s *Server) proxiesOf(ctx context.Context, tenant, project string, n int64) ([]protocol.ObjectRef, error) {
	key := revisionKey{tenant, project, n}
	if v, ok := s.revisionProxies.Load(key); ok {
		return v.([]protocol.ObjectRef), nil
	}
	rev, err := s.cfg.Store.RevisionByNumber(ctx, tenant, project, n)
	if err != nil {
		return nil, err
	}
	objs, err := revisionObjects(rev)
	if err != nil {
		return nil, err
	}
	var out []protocol.ObjectRef
	for _, u := range objs {
		if u.GetKind() == "NexoProxy" {
			out = append(out, protocol.ObjectRef{Namespace: u.GetNamespace(), Name: u.GetName()})
		}
	}
	s.revisionProxies.Store(key, out)
	return out, nil
}

// movingTypes are the command types whose application moves proxies to new graph revisions
// (their rows enter the deployed set): deploy and rollout. A preview's answer ran nowhere.
func movingTypes() []string {
	var out []string
	for _, c := range protocol.Commands {
		if c.EntersDeployedSet {
			out = append(out, c.Name)
		}
	}
	return out
}

// inventoryOf maps the environment's inventory by proxy.
func (s *Server) inventoryOf(ctx context.Context, env string) (map[protocol.ObjectRef]protocol.Deployment, error) {
	all, _, err := s.cfg.Store.Inventory(ctx, env)
	if err != nil {
		return nil, err
	}
	out := make(map[protocol.ObjectRef]protocol.Deployment, len(all))
	for _, d := range all {
		out[protocol.ObjectRef{Namespace: d.Namespace, Name: d.Name}] = d
	}
	return out, nil
}

// observeRuns records, after a heartbeat changed env's inventory or its Manager acknowledged a
// command (the only events that change a run's state), when each stage's revision there became
// Synced (and forgets it when it no longer is): what a promotion's soak counts from.
func (s *Server) observeRuns(ctx context.Context, env string) error {
	deployments, err := s.cfg.Store.EnvironmentStageDeployments(ctx, env)
	if err != nil || len(deployments) == 0 {
		return err
	}
	inventory, err := s.inventoryOf(ctx, env)
	if err != nil {
		return err
	}
	now := s.now()
	for _, d := range deployments {
		run, err := s.run(ctx, d, inventory)
		if err != nil {
			return err
		}
		switch synced := run.State == RunSynced; {
		case synced && d.SyncedSince == nil:
			err = s.cfg.Store.SetSyncedSince(ctx, d.CommandID, &now)
		case !synced && d.SyncedSince != nil:
			err = s.cfg.Store.SetSyncedSince(ctx, d.CommandID, nil)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// stageStatus is GET .../stages/{stage}/status: per environment the stage selects, the
// revision desired there (the last one queued through the stage) and how it runs.
func (s *Server) stageStatus(w http.ResponseWriter, r *http.Request, _ authz.Caller) error {
	p, err := s.stageTargets(r)
	if err != nil {
		return err
	}
	deployments, err := s.cfg.Store.LatestStageDeployments(r.Context(), p.tenant, p.stage.Project, p.stage.Name)
	if err != nil {
		return err
	}
	runs := []StageRun{}
	for _, d := range deployments {
		inventory, err := s.inventoryOf(r.Context(), d.Environment)
		if err != nil {
			return err
		}
		run, err := s.run(r.Context(), d, inventory)
		if err != nil {
			return err
		}
		if run.Running, err = s.cfg.Store.RunningRevision(r.Context(), p.tenant, p.stage.Project, p.stage.Name, d.Environment); err != nil {
			return err
		}
		runs = append(runs, run)
	}
	writeJSON(w, http.StatusOK, map[string]any{"stage": p.stage.Name, "promotion": p.stage.Promotion, "environments": runs})
	return nil
}

// eligibleEnvironments are the environments a stage selects (any of their targets eligible).
func (p stagePlan) eligibleEnvironments() []string {
	var out []string
	for _, t := range p.targets {
		if t.Eligible && !slices.Contains(out, t.Environment) {
			out = append(out, t.Environment)
		}
	}
	sort.Strings(out)
	return out
}

// StagePromote promotes a revision into the path's stage from the stage it promotes from.
type StagePromote struct {
	Revision int64  `json:"revision"`
	Message  string `json:"message,omitempty"`
}

// promote is POST .../stages/{stage}/promote {"revision"}: accepted when the stage promotes from
// another, and the revision has been Synced on every environment of that stage for at least
// the soak time; then, unless the stage requires approval, the revision is deployed (signed for
// each environment) to every environment the stage selects, all or none. The promotion is a
// record (GET .../projects/{project}/promotions/{id}); with approval required it waits for a
// project manager other than the promoter (.../promotions/{id}/approve).
func (s *Server) promote(w http.ResponseWriter, r *http.Request, c authz.Caller) error {
	var req StagePromote
	if err := decode(r, &req, smallBody); err != nil {
		return err
	}
	p, err := s.stageTargets(r)
	if err != nil {
		return err
	}
	if p.stage.Promotion.From == "" {
		return fail(http.StatusConflict, "stage %s promotes from no stage: set its promotesFrom (PUT .../stages/%s), or deploy to it", p.stage.Name, p.stage.Name)
	}
	rev, err := s.projectRevision(r, req.Revision)
	if err != nil {
		return err
	}
	if err := s.soaked(r, p, rev.Number); err != nil {
		return err
	}
	targets := p.eligibleEnvironments()
	if len(targets) == 0 {
		return fail(http.StatusConflict, "stage %s selects no environment: nothing to promote to", p.stage.Name)
	}
	for _, env := range targets {
		if err := s.refuseFrozen(r.Context(), p.tenant, env, p.stage.Project, p.stage.Name); err != nil {
			return err
		}
	}
	rec := storage.PromotionRecord{ID: "prm-" + randomID(8), Tenant: p.tenant, Project: p.stage.Project, From: p.stage.Promotion.From, To: p.stage.Name,
		Revision: rev.Number, Promoter: c.Actor(), State: storage.PromotionAwaitingApproval, Message: truncate(req.Message, maxRevisionMessage)}
	if !p.stage.Promotion.RequiresApproval {
		rec.State = storage.PromotionQueued
	}
	if err := s.cfg.Store.CreatePromotion(r.Context(), rec); err != nil {
		return err
	}
	code := http.StatusAccepted
	if rec.State == storage.PromotionQueued {
		if err := s.queuePromotion(r, c, p, rec); err != nil {
			return err
		}
		code = http.StatusCreated
	} else {
		auditOf(r).reason = fmt.Sprintf("promotion %s of revision %d from %s: awaiting a project manager's approval", rec.ID, rec.Revision, rec.From)
	}
	out, err := s.cfg.Store.PromotionByID(r.Context(), p.tenant, p.stage.Project, rec.ID)
	if err != nil {
		return err
	}
	writeJSON(w, code, out)
	return nil
}

// soaked refuses (409) a promotion of rev into p's stage unless rev is Synced on every
// environment of the upstream stage, for at least the stage's soak time.
func (s *Server) soaked(r *http.Request, p stagePlan, rev int64) error {
	from := p.stage.Promotion.From
	up, err := s.cfg.Store.Stage(r.Context(), p.tenant, p.stage.Project, from)
	if errors.Is(err, storage.ErrNotFound) {
		return fail(http.StatusConflict, "stage %s promotes from stage %s, which does not exist", p.stage.Name, from)
	} else if err != nil {
		return err
	}
	upstream := stagePlan{tenant: p.tenant, stage: up, envs: p.envs, targets: targeting.Targets(p.tenant, up.Stage, p.envs)}
	envs := upstream.eligibleEnvironments()
	if len(envs) == 0 {
		return fail(http.StatusConflict, "stage %s, which stage %s promotes from, selects no environment: revision %d cannot have run there", from, p.stage.Name, rev)
	}
	latest, err := s.cfg.Store.LatestStageDeployments(r.Context(), p.tenant, p.stage.Project, from)
	if err != nil {
		return err
	}
	soak := time.Duration(p.stage.Promotion.SoakSeconds) * time.Second
	now := s.now()
	var missing []string
	for _, env := range envs {
		i := slices.IndexFunc(latest, func(d storage.StageDeployment) bool { return d.Environment == env })
		switch {
		case i < 0:
			missing = append(missing, fmt.Sprintf("%s runs nothing of stage %s", env, from))
		case latest[i].Revision != rev:
			missing = append(missing, fmt.Sprintf("%s runs revision %d", env, latest[i].Revision))
		case latest[i].SyncedSince == nil:
			missing = append(missing, fmt.Sprintf("%s is not Synced on it yet (command %s)", env, latest[i].Command))
		case now.Sub(*latest[i].SyncedSince) < soak:
			missing = append(missing, fmt.Sprintf("%s has been Synced for %s of the %s soak (another %s)", env,
				now.Sub(*latest[i].SyncedSince).Truncate(time.Second), soak, (soak-now.Sub(*latest[i].SyncedSince)).Truncate(time.Second)))
		}
	}
	if len(missing) > 0 {
		return fail(http.StatusConflict, "revision %d is not ready to promote from stage %s to %s: %s; nothing was queued", rev, from, p.stage.Name, strings.Join(missing, "; "))
	}
	return nil
}

// queuePromotion deploys the promotion's revision to every environment p's stage selects, in
// the request's transaction (all or none), and records the promotion queued.
func (s *Server) queuePromotion(r *http.Request, c authz.Caller, p stagePlan, rec storage.PromotionRecord) error {
	rev, err := s.projectRevision(r, rec.Revision)
	if err != nil {
		return err
	}
	cmd, err := revisionCommand(rev, protocol.Deploy)
	if err != nil {
		return err
	}
	var queued []string
	for _, envID := range p.eligibleEnvironments() {
		env, err := s.cfg.Store.Environment(r.Context(), envID)
		if err != nil {
			return err
		}
		id, err := s.queueRevisionCommand(r, c, p, env, rev, cmd, storage.ViaPromotion, rec.ID, false)
		if err != nil {
			var ae *apiError
			if errors.As(err, &ae) {
				return fail(ae.code, "promotion of revision %d to environment %s: %s", rev.Number, envID, ae.msg)
			}
			return err
		}
		queued = append(queued, id+" ("+envID+")")
	}
	if err := s.cfg.Store.SetPromotionState(r.Context(), rec.ID, storage.PromotionQueued, rec.Message); err != nil {
		return err
	}
	auditOf(r).reason = fmt.Sprintf("promotion %s of revision %d from %s: queued %s", rec.ID, rec.Revision, rec.From, strings.Join(queued, ", "))
	return nil
}

// approvePromotion is POST .../projects/{project}/promotions/{id}/approve: a project manager (or
// tenant admin) other than the promoter approves a promotion awaiting approval; the soak and
// Synced checks run again, then the revision is queued as promote would have.
func (s *Server) approvePromotion(w http.ResponseWriter, r *http.Request, c authz.Caller) error {
	if err := s.pathProject(r); err != nil {
		return err
	}
	tenant, project := r.PathValue("tenant"), r.PathValue("project")
	rec, err := s.cfg.Store.PromotionByID(r.Context(), tenant, project, r.PathValue("id"))
	if errors.Is(err, storage.ErrNotFound) {
		return fail(http.StatusNotFound, "project %s has no promotion %s", project, r.PathValue("id"))
	} else if err != nil {
		return err
	}
	auditOf(r).target = "promotion " + rec.ID
	switch {
	case rec.State != storage.PromotionAwaitingApproval:
		return fail(http.StatusConflict, "promotion %s is %s: only one awaiting approval is approved", rec.ID, rec.State)
	case rec.Promoter == c.Actor():
		return fail(http.StatusForbidden, "%s promoted revision %d itself: a promotion is approved by a project manager other than its promoter", c.Actor(), rec.Revision)
	}
	st, err := s.cfg.Store.Stage(r.Context(), tenant, project, rec.To)
	if err != nil {
		return err
	}
	envs, err := s.cfg.Store.TenantEnvironments(r.Context(), tenant)
	if err != nil {
		return err
	}
	p := stagePlan{tenant: tenant, stage: st, envs: envs, targets: targeting.Targets(tenant, st.Stage, envs)}
	if err := s.soaked(r, p, rec.Revision); err != nil {
		return err
	}
	if err := s.cfg.Store.Approve(r.Context(), rec.ID, c.Actor()); err != nil {
		return err
	}
	if err := s.queuePromotion(r, c, p, rec); err != nil {
		return err
	}
	out, err := s.cfg.Store.PromotionByID(r.Context(), tenant, project, rec.ID)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// listPromotions is GET .../projects/{project}/promotions; showPromotion .../promotions/{id}.
func (s *Server) listPromotions(w http.ResponseWriter, r *http.Request, _ authz.Caller) error {
	if err := s.pathProject(r); err != nil {
		return err
	}
	all, err := s.cfg.Store.Promotions(r.Context(), r.PathValue("tenant"), r.PathValue("project"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{"promotions": all})
	return nil
}

func (s *Server) showPromotion(w http.ResponseWriter, r *http.Request, _ authz.Caller) error {
	if err := s.pathProject(r); err != nil {
		return err
	}
	rec, err := s.cfg.Store.PromotionByID(r.Context(), r.PathValue("tenant"), r.PathValue("project"), r.PathValue("id"))
	if errors.Is(err, storage.ErrNotFound) {
		return fail(http.StatusNotFound, "project %s has no promotion %s", r.PathValue("project"), r.PathValue("id"))
	} else if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, rec)
	return nil
}
