// Package catalog is the single source of truth for the 24 nexo.io kinds of this build:
// their plural and short names, the role they play, the pipeline slots they may occupy, and
// whether this build's operator reconciles them or only installs their schema.
//
// The CRD labels (nexo.io/support) and annotations (helm.sh/resource-policy: keep), the
// operator's registration list, the docs table and the preflight support matrix are all
// derived from Kinds. A test fails when the generated CRDs disagree with it.
package catalog

import (
	"fmt"
	"slices"
	"strings"
)

// BuildVersion is the bundle version whose support matrix Kinds describes.
const BuildVersion = "0.3.0"

// UpgradesFrom is the semver range of installed versions that upgrade to this build in one step:
// the bundle's olm.skipRange, what nexoctl install and nexoctl preflight --upgrade accept, and
// the range the CSV's replaces must fall in (docs/upgrade.md). Empty for the first release.
// Written by hand at each version bump: every version of the previous minor.
const UpgradesFrom = ">=0.2.0 <0.3.0"

// DefaultProxyImage is the proxy image released with this bundle: what a Manager reports as its
// configured proxy image unless the install sets another (the chart's manager.proxyImage, the
// CSV's NEXO_PROXY_IMAGE, kustomize's nexo-manager-config key proxyImage).
const DefaultProxyImage = Registry + "/nexo-proxy:" + BuildVersion

// Where releases are published (docs/release.md): the registry of the images, the bundle and
// the chart (Helm's OCI artifact), and the repository whose releases/<version>/ folder is each
// release's kustomize entry point. The install command names them, pinned to a version.
const (
	Registry         = "ghcr.io/nexo-io"
	ChartReference   = "oci://" + Registry + "/charts/nexo-edge"
	SourceRepository = "https://github.com/nexo-io/nexo-edge"
)

// MinKubernetesVersion is the oldest Kubernetes these kinds and this build's operator support:
// nexoctl preflight checks it, and the chart (kubeVersion) and the CSV (minKubeVersion) declare
// it. MinKubernetesReason says what needs it.
const (
	MinKubernetesVersion = "1.30.0"
	MinKubernetesReason  = "the admission policies that keep managed objects to the Manager are ValidatingAdmissionPolicy v1, served from Kubernetes 1.30"
)

// Group and Version of every Nexo kind.
const (
	Group   = "nexo.io"
	Version = "v1alpha1"
)

// Label and annotation keys stamped on every CRD from this catalog.
const (
	SupportLabel       = "nexo.io/support"
	ResourcePolicyKey  = "helm.sh/resource-policy"
	ResourcePolicyKeep = "keep"
	CategoryNexo       = "nexo"
)

// Support says what this build does with a kind.
type Support string

const (
	// Reconciled kinds are registered with the operator and become Ready when valid.
	Reconciled Support = "reconciled"
	// SchemaOnly kinds have an installed CRD but no controller: objects are stored, never used.
	SchemaOnly Support = "schema-only"
)

// Role is what a kind is for.
type Role string

const (
	RoleProxy         Role = "proxy"
	RolePipeline      Role = "pipeline"
	RoleProfile       Role = "profile"
	RoleLicense       Role = "license"
	RoleRouter        Role = "router"
	RoleStep          Role = "step"
	RoleObservability Role = "observability"
)

// Slot is a place where one kind references another.
type Slot string

const (
	// SlotRouter is NexoPipeline.spec.router.
	SlotRouter Slot = "router"
	// SlotRequest is NexoPipeline.spec.request[].
	SlotRequest Slot = "request"
	// SlotResponse is NexoPipeline.spec.response[].
	SlotResponse Slot = "response"
	// SlotConnection is NexoPipeline.spec.connection[].
	SlotConnection Slot = "connection"
	// SlotObservability is NexoProxy.spec.observabilityRefs[].
	SlotObservability Slot = "observability"
)

// Slots lists every slot in pipeline order.
var Slots = []Slot{SlotRouter, SlotRequest, SlotResponse, SlotConnection, SlotObservability}

// Kind describes one nexo.io kind.
type Kind struct {
	Kind        string
	Plural      string
	ShortName   string
	Role        Role
	Slots       []Slot
	Support     Support
	Description string
}

// Kinds is the catalog of this build, in documentation order.
var Kinds = []Kind{
	{"NexoProxy", "nexoproxies", "nxp", RoleProxy, nil, Reconciled,
		"The deployed proxy: binds a pipeline, an upstream, a deployment profile and a license."},
	{"NexoPipeline", "nexopipelines", "nxpipe", RolePipeline, nil, Reconciled,
		"Ordered router, request, response and connection references."},
	{"NexoDeploymentProfile", "nexodeploymentprofiles", "nxprof", RoleProfile, nil, Reconciled,
		"Approved runtime images (ingress, egress), step catalog (kind to image), pull secrets and defaults."},
	{"NexoLicense", "nexolicenses", "nxlic", RoleLicense, nil, Reconciled,
		"Signed offline license: licensee, expiry, entitlements and maximum proxies."},
	{"NexoRouter", "nexorouters", "nxrt", RoleRouter, []Slot{SlotRouter}, Reconciled,
		"Routes by database and collection to named upstream targets."},
	{"NexoTrafficSplit", "nexotrafficsplits", "nxsplit", RoleRouter, []Slot{SlotRouter}, Reconciled,
		"Weighted split across upstream targets; weights sum to 100."},
	{"NexoTenantIsolation", "nexotenantisolations", "nxtenant", RoleStep, []Slot{SlotRequest}, Reconciled,
		"Enforces a tenant field on every request."},
	{"NexoRateLimit", "nexoratelimits", "nxrl", RoleStep, []Slot{SlotRequest}, Reconciled,
		"Per-client operation rate limits."},
	{"NexoCommandPolicy", "nexocommandpolicies", "nxcmd", RoleStep, []Slot{SlotRequest}, Reconciled,
		"Allows or denies MongoDB commands."},
	{"NexoAuthPolicy", "nexoauthpolicies", "nxauth", RoleStep, []Slot{SlotRequest}, Reconciled,
		"Maps client identities to upstream credentials held in Secrets."},
	{"NexoPIIMasking", "nexopiimaskings", "nxpii", RoleStep, []Slot{SlotResponse}, Reconciled,
		"Redacts, hashes or partially masks fields in replies."},
	{"NexoResponseLimit", "nexoresponselimits", "nxresp", RoleStep, []Slot{SlotResponse}, Reconciled,
		"Caps documents and bytes per reply."},
	{"NexoConnectionPool", "nexoconnectionpools", "nxpool", RoleStep, []Slot{SlotConnection}, Reconciled,
		"Upstream connection pool sizes and idle timeouts."},
	{"NexoConnectionLimit", "nexoconnectionlimits", "nxconn", RoleStep, []Slot{SlotConnection}, Reconciled,
		"Caps client connections, in total and per client."},
	{"NexoMetrics", "nexometrics", "nxmet", RoleObservability, []Slot{SlotObservability}, Reconciled,
		"Prometheus endpoint; adds a metrics port to the proxy Service."},
	{"NexoTracing", "nexotracings", "nxtrace", RoleObservability, []Slot{SlotObservability}, Reconciled,
		"OTLP trace export endpoint and sampling."},
	{"NexoAuditLog", "nexoauditlogs", "nxaudit", RoleObservability, []Slot{SlotObservability}, Reconciled,
		"Audited command classes and their sink."},
	{"NexoAccessLog", "nexoaccesslogs", "nxaccess", RoleObservability, []Slot{SlotObservability}, Reconciled,
		"Access log format and sampling."},
	{"NexoConnectionPipeline", "nexoconnectionpipelines", "nxconnpipe", RolePipeline, []Slot{SlotConnection}, SchemaOnly,
		"Ordered connection-level pipeline."},
	{"NexoQueryGuard", "nexoqueryguards", "nxqg", RoleStep, []Slot{SlotRequest}, SchemaOnly,
		"Guards query shapes (operators, depth, unindexed scans)."},
	{"NexoFieldEncryption", "nexofieldencryptions", "nxfenc", RoleStep, []Slot{SlotRequest, SlotResponse}, SchemaOnly,
		"Client-side field encryption."},
	{"NexoResultCache", "nexoresultcaches", "nxcache", RoleStep, []Slot{SlotResponse}, SchemaOnly,
		"Caches query results."},
	{"NexoShadowTraffic", "nexoshadowtraffics", "nxshadow", RoleRouter, []Slot{SlotRouter}, SchemaOnly,
		"Mirrors traffic to a shadow upstream."},
	{"NexoSchemaValidation", "nexoschemavalidations", "nxschema", RoleStep, []Slot{SlotRequest}, SchemaOnly,
		"Validates written documents against a schema."},
}

// Lookup returns the catalog entry for a kind name.
func Lookup(kind string) (Kind, bool) {
	for _, k := range Kinds {
		if k.Kind == kind {
			return k, true
		}
	}
	return Kind{}, false
}

// WithSupport lists the kind names with the given support, in catalog order.
func WithSupport(s Support) []string {
	var out []string
	for _, k := range Kinds {
		if k.Support == s {
			out = append(out, k.Kind)
		}
	}
	return out
}

// InSlot lists the kind names that may occupy a slot, in catalog order.
func InSlot(s Slot) []string {
	var out []string
	for _, k := range Kinds {
		if slices.Contains(k.Slots, s) {
			out = append(out, k.Kind)
		}
	}
	return out
}

// AllowedIn reports whether kind may occupy slot.
func (k Kind) AllowedIn(s Slot) bool { return slices.Contains(k.Slots, s) }

// CRDName is the CustomResourceDefinition name of the kind.
func (k Kind) CRDName() string { return k.Plural + "." + Group }

// UnsupportedMessage is the sentence every component uses when a schema-only kind is referenced.
func UnsupportedMessage(kind string) string {
	return fmt.Sprintf("%s is installed as a schema only; nexo-operator %s does not reconcile it", kind, BuildVersion)
}

// Summary is the sentence descriptions use for the kinds of this build: how many there are, how
// many are reconciled, and which are installed as schemas only.
func Summary() string {
	schemaOnly := WithSupport(SchemaOnly)
	return fmt.Sprintf("Of the %d %s kinds, %d are reconciled in %s and %d are installed as schemas only (%s).",
		len(Kinds), Group, len(WithSupport(Reconciled)), BuildVersion, len(schemaOnly), strings.Join(schemaOnly, ", "))
}

// Names lists every kind name in catalog order.
func Names() []string {
	out := make([]string, len(Kinds))
	for i, k := range Kinds {
		out[i] = k.Kind
	}
	return out
}

// MarkdownTable renders the catalog as the docs table (generated into docs/catalog.md).
func MarkdownTable() string {
	var b strings.Builder
	b.WriteString("| kind | plural | short name | role | slots | support in " + BuildVersion + " |\n")
	b.WriteString("|---|---|---|---|---|---|\n")
	for _, k := range Kinds {
		slots := make([]string, len(k.Slots))
		for i, s := range k.Slots {
			slots[i] = string(s)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", k.Kind, k.Plural, k.ShortName, k.Role,
			strings.Join(slots, ", "), k.Support)
	}
	return b.String()
}
