// The capability table (docs/controlplane.md, "Targeting"): which roles may take each action.
// Every decision the tenancy API takes about a caller's rights is a row here.

package authz

import (
	"slices"

	"github.com/nexo-io/nexo-edge/controlplane/targeting"
)

// Action is something a principal asks the Control Plane to do.
type Action string

const (
	ManagePrincipals      Action = "principal.manage"       // create principals, bind and unbind roles
	ManageEnvironments    Action = "environment.manage"     // register environments, rotate their tokens
	SetEnvironmentLabels  Action = "environment.set-labels" // the labels stage selectors match
	ManageNamespaceTarget Action = "namespace-target.manage"
	ManageProjects        Action = "project.manage" // create and delete projects
	SetStage              Action = "stage.set"      // a stage's selectors
	Deploy                Action = "deploy"
	Rollout               Action = "rollout"
	Uninstall             Action = "uninstall"
	ReadTargets           Action = "targets.read"
	ReadAudit             Action = "audit.read"
	// ShareNamespaceTargets lets a stage reach namespace targets another project's stage reaches
	// (a stage's sharedTargets).
	ShareNamespaceTargets Action = "stage.share-targets"
	// ReadEntitlement reads the tenant's license entitlement and what counts against it.
	ReadEntitlement Action = "entitlement.read"
	// Change management (docs/controlplane.md, "Change management").
	CreateRevision        Action = "revision.create"   // record a project's next revision
	ReadChanges           Action = "revision.read"     // revisions, diffs, previews, promotions, stage status
	Preview               Action = "preview"           // ask an environment what a revision would do
	Promote               Action = "promotion.promote" // promote a revision from the upstream stage
	ApprovePromotion      Action = "promotion.approve" // approve another principal's promotion
	Rollback              Action = "rollback"          // deploy a revision that ran before again
	OverrideCompatibility Action = "compatibility.override"
	FreezeEnvironment     Action = "environment.freeze" // freeze and thaw an environment
	FreezeStage           Action = "stage.freeze"       // freeze and thaw a stage
	ReadHealth            Action = "environment.health" // an environment's heartbeat state, bundle and limits
)

// Actions in the order docs/controlplane.md lists them.
var Actions = []Action{ManagePrincipals, ManageEnvironments, SetEnvironmentLabels, ManageNamespaceTarget, ManageProjects,
	SetStage, ShareNamespaceTargets, Deploy, Rollout, Uninstall, ReadTargets, ReadAudit, ReadEntitlement,
	CreateRevision, ReadChanges, Preview, Promote, ApprovePromotion, Rollback, OverrideCompatibility, FreezeEnvironment, FreezeStage, ReadHealth}

// capabilities is the capability table: which roles may take each action. Tenant-level actions
// belong to tenant admins alone; a project's roles act inside their project only (Can).
var capabilities = map[Action][]targeting.Role{
	ManagePrincipals:      {targeting.TenantAdmin},
	ManageEnvironments:    {targeting.TenantAdmin},
	SetEnvironmentLabels:  {targeting.TenantAdmin},
	ManageNamespaceTarget: {targeting.TenantAdmin},
	ManageProjects:        {targeting.TenantAdmin},
	SetStage:              {targeting.TenantAdmin, targeting.ProjectManager},
	Deploy:                {targeting.TenantAdmin, targeting.ProjectManager, targeting.Editor},
	Rollout:               {targeting.TenantAdmin, targeting.ProjectManager, targeting.Editor},
	Uninstall:             {targeting.TenantAdmin, targeting.ProjectManager},
	ReadTargets:           {targeting.TenantAdmin, targeting.ProjectManager, targeting.Editor, targeting.Viewer},
	ReadAudit:             {targeting.TenantAdmin}, // the tenant's whole history: tenant-wide
	ShareNamespaceTargets: {targeting.TenantAdmin}, // a namespace target belongs to one project unless shared
	ReadEntitlement:       {targeting.TenantAdmin}, // the tenant's license: tenant-wide
	CreateRevision:        {targeting.TenantAdmin, targeting.ProjectManager, targeting.Editor},
	ReadChanges:           {targeting.TenantAdmin, targeting.ProjectManager, targeting.Editor, targeting.Viewer},
	Preview:               {targeting.TenantAdmin, targeting.ProjectManager, targeting.Editor}, // changes nothing, but runs in the cluster
	Promote:               {targeting.TenantAdmin, targeting.ProjectManager, targeting.Editor},
	ApprovePromotion:      {targeting.TenantAdmin, targeting.ProjectManager}, // never the promoter (checked on the request)
	Rollback:              {targeting.TenantAdmin, targeting.ProjectManager},
	OverrideCompatibility: {targeting.TenantAdmin, targeting.ProjectManager}, // deploy where compatibility is unknown
	FreezeEnvironment:     {targeting.TenantAdmin},                           // an environment serves every project
	FreezeStage:           {targeting.TenantAdmin, targeting.ProjectManager},
	ReadHealth:            {targeting.TenantAdmin, targeting.ProjectManager, targeting.Editor, targeting.Viewer},
}

// anyProject are the tenant-level actions a project's role grants too: every role of a tenant
// reads the health of the tenant's environments, whichever project it is bound in.
var anyProject = []Action{ReadHealth}

// Can reports whether role may take action.
func Can(role targeting.Role, action Action) bool { return slices.Contains(capabilities[action], role) }
