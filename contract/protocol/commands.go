package protocol

// The command table (docs/protocol.md, "Commands"): every command type, declared once. The
// Control Plane prepares commands through a table keyed by these names and the Manager executes
// them through another; tests on both sides fail when a row has no handler there, or a handler no
// row, and when docs/protocol.md has no row for it. Adding a command type is a row here, one
// handler per side, its docs and its tests.

// Command type names.
const (
	Deploy    = "deploy"
	Rollout   = "rollout"
	Upgrade   = "upgrade"
	Uninstall = "uninstall"
	// Preview is a deploy that changes nothing: the Manager validates the signed manifests as a
	// deploy would, has the API server dry-run them, and answers what they would do (Preview).
	Preview = "preview"
)

// WorkloadConfig is the legacy workload configuration of earlier Managers: raw workload settings
// instead of Nexo objects. It is not a command type: the Control Plane refuses to queue it and a
// Manager that receives one acknowledges it failed, saying what to send instead.
const WorkloadConfig = "workload-config"

// CommandType is one row of the command table: a command's name, the capability a Manager must
// advertise before the Control Plane queues one for it, and what the command does to the
// Control Plane's state.
type CommandType struct {
	Name string
	// Capability is what the environment's last heartbeat must advertise; the Control Plane
	// refuses (409) to queue the command otherwise.
	Capability string
	// CarriesProxies: the command names NexoProxies (its manifests', or the one it removes),
	// which the environment view reports per command.
	CarriesProxies bool
	// CountsAgainstEntitlement: the proxies it carries count against the tenant's entitlement
	// while the command is pending or delivered. A command that only looks never does.
	CountsAgainstEntitlement bool
	// MayAddProxies: the command may bring proxies the environment does not run yet, so through
	// a stage it is checked against the tenant's entitlement before it is queued.
	MayAddProxies bool
	// EntersDeployedSet: once acknowledged applied, its manifests join the environment's
	// deployed set (what a later rollout re-signs).
	EntersDeployedSet bool
	// LeavesDeployedSet: once queued, the proxy it names leaves the deployed set, so no later
	// rollout re-creates it.
	LeavesDeployedSet bool
	// ChangesNothing: the command only looks. The Manager records no outcome for it and runs it
	// again when it is delivered again; the Control Plane keeps its answer (a preview's).
	ChangesNothing bool
	// Summary says what the command does, for docs and refusals.
	Summary string
}

// Commands is the command table, in the order the docs list it.
var Commands = []CommandType{
	{Name: Deploy, Capability: CapDeploy, CarriesProxies: true, CountsAgainstEntitlement: true, MayAddProxies: true, EntersDeployedSet: true,
		Summary: "server-side apply of signed nexo.io manifests into the command's namespaces"},
	{Name: Rollout, Capability: CapRollout, CarriesProxies: true, CountsAgainstEntitlement: true, EntersDeployedSet: true,
		Summary: "set the proxy image on Manager-owned NexoProxies (signed ones come re-signed)"},
	{Name: Upgrade, Capability: CapUpgrade,
		Summary: "report whether the installed bundle is the target version"},
	{Name: Uninstall, Capability: CapUninstall, CarriesProxies: true, LeavesDeployedSet: true,
		Summary: "delete one Manager-owned NexoProxy; owner references remove its children"},
	{Name: Preview, Capability: CapPreview, ChangesNothing: true,
		Summary: "what a deploy of signed nexo.io manifests would do, from a server-side dry run and the operator's rendering; changes nothing"},
}

// CommandTypeOf returns the row of a command type name.
func CommandTypeOf(name string) (CommandType, bool) {
	for _, c := range Commands {
		if c.Name == name {
			return c, true
		}
	}
	return CommandType{}, false
}

// CommandNames are the names of the table's rows, for messages ("use deploy, rollout, …").
func CommandNames() []string {
	out := make([]string, len(Commands))
	for i, c := range Commands {
		out[i] = c.Name
	}
	return out
}
