package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NexoProxySpec binds a pipeline to an upstream, a deployment profile and a license.
type NexoProxySpec struct {
	// pipelineRef names the NexoPipeline whose router and steps this proxy runs.
	PipelineRef LocalObjectReference `json:"pipelineRef"`

	// upstream is the default MongoDB endpoint; a router may send some traffic elsewhere.
	Upstream Target `json:"upstream"`

	// profileRef names the NexoDeploymentProfile that supplies approved images and defaults.
	ProfileRef LocalObjectReference `json:"profileRef"`

	// licenseRef names the NexoLicense that entitles this proxy and its steps.
	LicenseRef LocalObjectReference `json:"licenseRef"`

	// observabilityRefs attach NexoMetrics, NexoTracing, NexoAuditLog or NexoAccessLog objects.
	// +optional
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:XValidation:rule="self.all(x, self.exists_one(y, y.kind == x.kind && y.name == x.name))",message="observabilityRefs must not list the same {kind, name} twice; remove the duplicate"
	// +kubebuilder:validation:XValidation:rule="self.filter(x, x.kind == 'NexoMetrics').size() <= 1",message="at most one NexoMetrics can be attached to a proxy, because it owns the Service's metrics port"
	ObservabilityRefs []ObservabilityRef `json:"observabilityRefs,omitempty"`

	// replicas is the number of proxy pods; the profile's default applies when unset.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	Replicas *int32 `json:"replicas,omitempty"`

	// port is the MongoDB wire-protocol port clients connect to.
	// +optional
	// +kubebuilder:default=27017
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port,omitempty"`

	// tls terminates client TLS at the proxy with the certificate in a kubernetes.io/tls Secret.
	// +optional
	TLS *ProxyTLS `json:"tls,omitempty"`

	// localAccess exposes the proxy on a fixed NodePort, for development clusters.
	// +optional
	LocalAccess *LocalAccess `json:"localAccess,omitempty"`

	// proxyImage overrides the profile's ingress and egress image; the Manager's rollout
	// command sets it.
	// +optional
	ProxyImage Image `json:"proxyImage,omitempty"`

	// resources of the ingress and egress containers; the profile's default applies when unset.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`
}

// ProxyTLS configures client-facing TLS.
type ProxyTLS struct {
	// secretRef names a kubernetes.io/tls Secret in the proxy's namespace; it is mounted into the pod.
	SecretRef SecretReference `json:"secretRef"`

	// clientCASecretRef names a Secret whose ca.crt verifies client certificates (mutual TLS).
	// +optional
	ClientCASecretRef *SecretReference `json:"clientCASecretRef,omitempty"`
}

// LocalAccess exposes the proxy through a NodePort Service.
// +kubebuilder:validation:XValidation:rule="!self.enabled || has(self.nodePort)",message="localAccess.nodePort is required when localAccess.enabled is true; pick a port from 30000 to 32767"
type LocalAccess struct {
	// enabled switches the Service to type NodePort.
	Enabled bool `json:"enabled"`

	// nodePort is the fixed node port, so the address stays stable across reconciles.
	// +optional
	// +kubebuilder:validation:Minimum=30000
	// +kubebuilder:validation:Maximum=32767
	NodePort *int32 `json:"nodePort,omitempty"`
}

// ProxyPhase summarises a proxy's state.
// +kubebuilder:validation:Enum=Pending;Progressing;Ready;Degraded;Failed
type ProxyPhase string

const (
	ProxyPending     ProxyPhase = "Pending"
	ProxyProgressing ProxyPhase = "Progressing"
	ProxyReady       ProxyPhase = "Ready"
	ProxyDegraded    ProxyPhase = "Degraded"
	ProxyFailed      ProxyPhase = "Failed"
)

// NexoProxyStatus is the observed state of a NexoProxy.
type NexoProxyStatus struct {
	Status `json:",inline"`

	// phase summarises the conditions.
	// +optional
	Phase ProxyPhase `json:"phase,omitempty"`

	// replicas is the number of proxy pods the Deployment has.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// readyReplicas is the number of proxy pods that are Ready.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`

	// graphRevision is the desired revision: a short sha256 of the resolved graph's specs,
	// applied to the Deployment (its config is in the ConfigMaps <proxy>-routing-<revision> and
	// <proxy>-steps-<revision>); identical graphs give identical revisions on any cluster.
	// +optional
	GraphRevision string `json:"graphRevision,omitempty"`

	// availableRevision is the revision whose rollout last completed: every replica runs it.
	// It differs from graphRevision while a rollout is in progress or stalled.
	// +optional
	AvailableRevision string `json:"availableRevision,omitempty"`

	// previousRevision is the revision applied before graphRevision; its config is kept, so
	// `kubectl rollout undo` finds it. Older revisions' config is removed once a rollout completes.
	// +optional
	PreviousRevision string `json:"previousRevision,omitempty"`

	// configHash is a sha256 of the rendered config and the referenced Secrets' contents that
	// the workload runs; the pod template carries it so pods roll when it changes.
	// +optional
	ConfigHash string `json:"configHash,omitempty"`
}

// NexoProxy is the deployed MongoDB-protocol proxy.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=nexoproxies,shortName=nxp,categories=nexo,scope=Namespaced
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.status.readyReplicas`,priority=1
// +kubebuilder:printcolumn:name="Revision",type=string,JSONPath=`.status.graphRevision`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63 && self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="a NexoProxy name becomes the name of its Service and Deployment, so it must be a DNS-1035 label: at most 63 lowercase letters, digits and '-', starting with a letter and ending with a letter or digit (for example orders-proxy; not 1proxy or orders.proxy)"
type NexoProxy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   NexoProxySpec   `json:"spec"`
	Status NexoProxyStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// NexoProxyList contains a list of NexoProxy.
type NexoProxyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NexoProxy `json:"items"`
}

func init() { SchemeBuilder.Register(&NexoProxy{}, &NexoProxyList{}) }
