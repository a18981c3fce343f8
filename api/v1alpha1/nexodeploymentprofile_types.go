package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NexoDeploymentProfileSpec records the approved runtime images and defaults used to render
// proxy Deployments.
type NexoDeploymentProfileSpec struct {
	// images are the approved proxy runtime images.
	Images RuntimeImages `json:"images"`

	// approvedImages are the images a NexoProxy of this profile may select in spec.proxyImage,
	// besides spec.images: a repository with a tag (the tag's image, also when pinned by digest)
	// or with a digest (that image only). A proxyImage outside them is Validated=False
	// (ImageNotApproved) and the proxy keeps running its last good revision.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	ApprovedImages []Image `json:"approvedImages,omitempty"`

	// stepCatalog gives the container image for each step kind; a pipeline step whose kind has
	// an entry runs as its own container in the proxy pod.
	// +optional
	// +listType=map
	// +listMapKey=kind
	// +kubebuilder:validation:MaxItems=32
	StepCatalog []StepImage `json:"stepCatalog,omitempty"`

	// imagePullSecrets name Secrets in the operator namespace; they are copied into each proxy
	// namespace and kept in sync.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	ImagePullSecrets []SecretReference `json:"imagePullSecrets,omitempty"`

	// drainTimeoutSeconds is how long a stopping proxy drains client connections; the pod's
	// terminationGracePeriodSeconds is set longer than it.
	// +optional
	// +kubebuilder:default=30
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=3600
	DrainTimeoutSeconds int32 `json:"drainTimeoutSeconds,omitempty"`

	// progressDeadlineSeconds is how long a rollout may make no progress before the proxy is
	// Degraded with reason RolloutStalled (the Deployment's progressDeadlineSeconds).
	// +optional
	// +kubebuilder:default=600
	// +kubebuilder:validation:Minimum=5
	// +kubebuilder:validation:Maximum=86400
	ProgressDeadlineSeconds int32 `json:"progressDeadlineSeconds,omitempty"`

	// defaults apply to proxies that do not set the field themselves.
	// +optional
	Defaults ProfileDefaults `json:"defaults,omitempty"`
}

// RuntimeImages are the two proxy containers' images; a NexoProxy without spec.proxyImage runs
// them, and they are approved for spec.proxyImage too.
type RuntimeImages struct {
	// ingress accepts client connections and runs request steps.
	Ingress Image `json:"ingress"`
	// egress talks to the upstream and runs response and connection steps.
	Egress Image `json:"egress"`
}

// StepImage maps a step kind to its container image.
type StepImage struct {
	// kind of step.
	// +kubebuilder:validation:Enum=NexoTenantIsolation;NexoRateLimit;NexoCommandPolicy;NexoAuthPolicy;NexoQueryGuard;NexoFieldEncryption;NexoSchemaValidation;NexoPIIMasking;NexoResponseLimit;NexoResultCache;NexoConnectionPool;NexoConnectionLimit;NexoConnectionPipeline
	Kind string `json:"kind"`
	// image that runs the step.
	Image Image `json:"image"`
	// resources of the step's container; the profile's defaults.resources apply when unset.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`
}

// ProfileDefaults are per-proxy defaults.
type ProfileDefaults struct {
	// replicas when the proxy does not set spec.replicas.
	// +optional
	// +kubebuilder:default=2
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	Replicas int32 `json:"replicas,omitempty"`

	// resources for the ingress and egress containers (unless the proxy sets spec.resources) and
	// for step containers whose stepCatalog entry sets none.
	// +optional
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`
}

// NexoDeploymentProfile records approved images, the step catalog, pull secrets and defaults.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=nexodeploymentprofiles,shortName=nxprof,categories=nexo,scope=Namespaced
// +kubebuilder:printcolumn:name="Ingress",type=string,JSONPath=`.spec.images.ingress`,priority=1
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NexoDeploymentProfile struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   NexoDeploymentProfileSpec `json:"spec"`
	Status Status                    `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// NexoDeploymentProfileList contains a list of NexoDeploymentProfile.
type NexoDeploymentProfileList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NexoDeploymentProfile `json:"items"`
}

func init() { SchemeBuilder.Register(&NexoDeploymentProfile{}, &NexoDeploymentProfileList{}) }
