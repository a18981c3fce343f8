package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Status is the status every Nexo kind reports.
type Status struct {
	// observedGeneration is the metadata.generation the conditions describe.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// conditions describe the object's state; Ready is always present once reconciled.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// signedRevision is the highest Control Plane signature revision the operator accepted for
	// this object. A manifest carrying a lower revision is an older one re-applied (a replay) and
	// is refused; an object that had a signature and lost it is refused too.
	// +optional
	SignedRevision int64 `json:"signedRevision,omitempty"`
}

// LocalObjectReference names an object of an implied kind in the same namespace.
type LocalObjectReference struct {
	// name of the object in the same namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$')",message="name must be a lowercase DNS subdomain name, for example my-profile"
	Name string `json:"name"`
}

// SecretReference names a Secret in the same namespace. Secret values are never inlined in a
// Nexo object.
type SecretReference struct {
	// name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$')",message="secret name must be a lowercase DNS subdomain name, for example upstream-credentials"
	Name string `json:"name"`
}

// SecretKeyReference names one key of a Secret in the same namespace.
type SecretKeyReference struct {
	// name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$')",message="secret name must be a lowercase DNS subdomain name, for example upstream-credentials"
	Name string `json:"name"`

	// key inside the Secret's data.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[-._a-zA-Z0-9]+$')",message="secret key may contain only letters, digits, '-', '_' and '.'"
	Key string `json:"key"`
}

// Address is an upstream MongoDB endpoint, host:port.
// +kubebuilder:validation:MaxLength=260
// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Za-z0-9]([-A-Za-z0-9.]*[A-Za-z0-9])?:([1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])$')",message="address must be host:port with a port from 1 to 65535, for example mongo-0.mongo.db.svc:27017 (no scheme, no credentials)"
type Address string

// Duration is a Go duration string such as 30s, 5m or 1h30m.
// +kubebuilder:validation:MaxLength=32
// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ms|s|m|h))+$')",message="must be a duration such as 500ms, 30s, 5m or 1h30m"
type Duration string

// Percent is a whole percentage from 0 to 100.
// +kubebuilder:validation:Minimum=0
// +kubebuilder:validation:Maximum=100
type Percent int32

// UpstreamTLS configures TLS towards an upstream.
type UpstreamTLS struct {
	// enabled turns TLS on towards the upstream.
	// +optional
	Enabled bool `json:"enabled,omitempty"`

	// caSecretRef names a Secret whose ca.crt verifies the upstream certificate;
	// the system roots are used when it is empty.
	// +optional
	CASecretRef *SecretReference `json:"caSecretRef,omitempty"`

	// insecureSkipVerify disables certificate verification; for development only.
	// +optional
	InsecureSkipVerify bool `json:"insecureSkipVerify,omitempty"`
}

// Target is a named upstream endpoint.
type Target struct {
	// name identifies the target inside its router.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="target name must be a lowercase DNS label, for example primary"
	Name string `json:"name"`

	// address of the upstream, host:port.
	Address Address `json:"address"`

	// tls towards this target.
	// +optional
	TLS *UpstreamTLS `json:"tls,omitempty"`
}

// Image is a container image reference: registry/repository[:tag][@sha256:digest].
// Unpinned references (no tag, or latest) are accepted here and warned about by nexoctl preflight.
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=512
// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]+([._/:-]+[a-zA-Z0-9]+)*(@sha256:[a-f0-9]{64})?$')",message="must be an image reference such as registry.example.com/nexo/proxy:0.2.0 or registry.example.com/nexo/proxy@sha256:<64 hex digits>"
type Image string

// SchemaOnlyStatus is the status of a kind this bundle installs as a schema only. No controller
// writes it: the API server fills in support from the schema's default, so `kubectl get` shows
// the kind is not reconciled.
type SchemaOnlyStatus struct {
	Status `json:",inline"`

	// support is SchemaOnly: this bundle's operator stores the kind but does not reconcile it.
	// +kubebuilder:default=SchemaOnly
	// +optional
	Support string `json:"support,omitempty"`
}
