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
)

// Actions in the order docs/controlplane.md lists them.
var Actions = []Action{ManagePrincipals, ManageEnvironments, SetEnvironmentLabels, ManageNamespaceTarget, ManageProjects,
	SetStage, ShareNamespaceTargets, Deploy, Rollout, Uninstall, ReadTargets, ReadAudit, ReadEntitlement}

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
}

// Can reports whether role may take action.
func Can(role targeting.Role, action Action) bool { return slices.Contains(capabilities[action], role) }
