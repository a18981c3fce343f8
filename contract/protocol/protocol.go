// Package protocol defines the Manager ↔ Control Plane protocol, version v1: HTTP + JSON with a
// bearer connect token. See docs/protocol.md for request and response examples.
//
//	POST /v1/heartbeat               Heartbeat → HeartbeatResponse (commands to apply)
//	POST /v1/commands/{id}/ack       Ack → 204 (acknowledging twice is harmless)
package protocol

import "encoding/json"

// Version is the protocol version carried by every heartbeat.
const Version = "v1"

// Capabilities a Manager of this build advertises.
const (
	CapHeartbeat         = "heartbeat.v1"
	CapDeploy            = "command.deploy"
	CapRollout           = "command.rollout"
	CapUpgrade           = "command.upgrade"
	CapUninstall         = "command.uninstall"
	CapPreview           = "command.preview"
	CapBundleVersion     = "inventory.bundle-version"
	CapCRDKinds          = "inventory.crd-kinds"
	CapSchemaFingerprint = "inventory.schema-fingerprint"
	CapPipelineKinds     = "inventory.pipeline-kinds"
	// CapInventoryDelta: the Manager reports its proxies as changes against the inventory the
	// Control Plane confirmed (Heartbeat.InventoryBase), not as a full list (see Inventory).
	CapInventoryDelta = "inventory.delta"
	// CapPromotionContract: the Manager reports what a promotion between bundle versions needs
	// (installed bundle version, kind set, schema fingerprint, accepted pipeline kinds).
	CapPromotionContract = "promotion-contract.v1"
	// CapProxyStatus: inventory entries carry each proxy's phase, Ready reason and available
	// revision. The Control Plane announces it in HeartbeatResponse.Capabilities; a Manager sends
	// the fields only once it has seen it (a stricter, older Control Plane would refuse them).
	CapProxyStatus = "proxy.status"
	// CapKindSupport: heartbeats carry SchemaOnlyKinds, the installed kinds whose CRD says the
	// installed operator does not reconcile them. Announced by the Control Plane like
	// CapProxyStatus; a Manager sends the field once it has seen it.
	CapKindSupport = "inventory.kind-support"
)

// Heartbeat is the Manager's periodic report.
type Heartbeat struct {
	ProtocolVersion string   `json:"protocolVersion"`
	ManagerVersion  string   `json:"managerVersion"`
	Capabilities    []string `json:"capabilities"`
	// ClusterID is the UID of the kube-system namespace: the cluster's identity.
	ClusterID      string       `json:"clusterId"`
	Cluster        Cluster      `json:"cluster"`
	ProxyImage     string       `json:"proxyImage,omitempty"`
	ManagedProxies int          `json:"managedProxies"`
	Deployments    []Deployment `json:"deployments"`
	// Beyond the seeds, each advertised as a capability.
	// BundleVersion is the installed bundle, read from the cluster: the labels its installer
	// wrote on the nexo-operator Deployment (OLM's olm.owner CSV name, the chart's helm.sh/chart,
	// else app.kubernetes.io/version); "" when no operator Deployment is found in the Manager's
	// namespace. InstalledBy says which: "olm", "helm" or "kustomize".
	BundleVersion string `json:"bundleVersion,omitempty"`
	InstalledBy   string `json:"installedBy,omitempty"`
	// PipelineKinds are the kinds the installed NexoPipeline CRD accepts, per slot (router,
	// request, response, connection).
	PipelineKinds     map[string][]string `json:"pipelineKinds,omitempty"`
	InstalledKinds    []string            `json:"installedKinds,omitempty"`
	SchemaFingerprint string              `json:"schemaFingerprint,omitempty"`
	// SchemaOnlyKinds (with CapKindSupport) are the installed kinds whose CRD is labelled
	// nexo.io/support=schema-only: stored, never reconciled by the installed operator.
	SchemaOnlyKinds []string `json:"schemaOnlyKinds,omitempty"`

	// With CapInventoryDelta, Deployments stays empty: the Manager sends what changed since the
	// inventory the Control Plane last confirmed. InventoryBase is that inventory's digest (the
	// empty inventory's at first, or after a resync), InventoryDigest the digest of everything
	// the Manager holds now; Changed and Removed turn the first into the second, at most
	// MaxInventoryChanges at a time (the rest follow at the next heartbeats). Unchanged proxies
	// cost nothing per heartbeat.
	InventoryBase   string       `json:"inventoryBase,omitempty"`
	InventoryDigest string       `json:"inventoryDigest,omitempty"`
	Changed         []Deployment `json:"changed,omitempty"`
	Removed         []ObjectRef  `json:"removed,omitempty"`

	// Limits are the cluster's own limits on what its Manager may deploy, as its admin set them
	// (docs/controlplane.md, "Targeting"). Nil: not reported, which the Control Plane treats as
	// allowing nothing.
	Limits *Limits `json:"limits,omitempty"`
}

// Limits are a cluster's limits on its Manager: the namespaces it may deploy into and the image
// repositories a rollout may set. Empty allows nothing.
type Limits struct {
	Namespaces        []string `json:"namespaces"`
	ImageRepositories []string `json:"imageRepositories"`
}

// MaxInventoryChanges bounds the changes one heartbeat carries: about 120 bytes each, so a
// heartbeat stays far below the Control Plane's 1 MiB limit however many proxies there are.
const MaxInventoryChanges = 2000

// Cluster is metadata about the cluster.
type Cluster struct {
	KubernetesVersion string `json:"kubernetesVersion"`
	Region            string `json:"region,omitempty"`
	Zone              string `json:"zone,omitempty"`
}

// Deployment is one Manager-owned proxy.
type Deployment struct {
	Namespace     string `json:"namespace"`
	Name          string `json:"name"`
	Replicas      int32  `json:"replicas"`
	ReadyReplicas int32  `json:"readyReplicas"`
	GraphRevision string `json:"graphRevision,omitempty"`
	// With CapProxyStatus: the NexoProxy's phase, the reason of its Ready condition, and the
	// revision whose rollout last completed (GraphRevision is the desired one).
	Phase             string `json:"phase,omitempty"`
	ReadyReason       string `json:"readyReason,omitempty"`
	AvailableRevision string `json:"availableRevision,omitempty"`
}

// HeartbeatResponse steers the Manager: when to call again and what to do.
type HeartbeatResponse struct {
	NextHeartbeatSeconds int       `json:"nextHeartbeatSeconds"`
	Commands             []Command `json:"commands"`
	// SigningKeys are the public keys the Control Plane signs this environment's manifests with:
	// the active one and those being retired (both valid during a rotation). The Manager keeps
	// the cluster's trusted-keys Secret equal to this set.
	SigningKeys []SigningKey `json:"signingKeys,omitempty"`
	// InventoryDigest (to a Manager with CapInventoryDelta) is the digest of the inventory the
	// Control Plane holds after this heartbeat: the Manager's next InventoryBase when it matches
	// what the Manager expects. InventoryResync asks the Manager to start again from the empty
	// inventory (the heartbeat's base was not the Control Plane's).
	InventoryDigest string `json:"inventoryDigest,omitempty"`
	InventoryResync bool   `json:"inventoryResync,omitempty"`
	// Capabilities the Control Plane understands in heartbeats (CapProxyStatus).
	Capabilities []string `json:"capabilities,omitempty"`
}

// SigningKey is one Control Plane public key.
type SigningKey struct {
	KeyID string `json:"keyId"`
	// PublicKey is the PEM (PKIX) encoding.
	PublicKey string `json:"publicKey"`
	// State is "active" (signs new manifests) or "previous" (still trusted until retired).
	State string `json:"state"`
}

// Command is one instruction. A command id is applied at most once.
type Command struct {
	ID   string `json:"id"`
	Type string `json:"type"`
	// Deploy: signed nexo.io manifests, only into Namespaces.
	Namespaces []string          `json:"namespaces,omitempty"`
	Manifests  []json.RawMessage `json:"manifests,omitempty"`
	// Rollout: the proxy image to set on Manager-owned NexoProxies.
	Image string `json:"image,omitempty"`
	// Upgrade: the bundle version to move to.
	TargetVersion string `json:"targetVersion,omitempty"`
	// Uninstall (and an optional Rollout target): one Manager-owned NexoProxy.
	Proxy *ObjectRef `json:"proxy,omitempty"`
}

// ObjectRef names a namespaced object.
type ObjectRef struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// Ack results.
const (
	Applied = "applied"
	Failed  = "failed"
)

// Ack acknowledges one command.
type Ack struct {
	Status  string `json:"status"`
	Message string `json:"message"`
	// Preview is what the manifests do (a preview's answer) or were predicted to do when they
	// were applied (a deploy's proxies; its objects are left out): see preview.go.
	Preview *PreviewResult `json:"preview,omitempty"`
}

// Error is the body of every non-2xx response.
type Error struct {
	Error string `json:"error"`
}
