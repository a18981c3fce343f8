package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// NexoRouterSpec routes by database and collection to named targets.
// +kubebuilder:validation:XValidation:rule="!has(self.routes) || self.routes.all(r, self.targets.exists(t, t.name == r.target))",message="every route's target must name an entry in spec.targets"
// +kubebuilder:validation:XValidation:rule="!has(self.defaultTarget) || self.targets.exists(t, t.name == self.defaultTarget)",message="defaultTarget must name an entry in spec.targets"
type NexoRouterSpec struct {
	// targets are the upstream endpoints routes send operations to.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	Targets []Target `json:"targets"`

	// routes are evaluated in order; the first match wins.
	// +optional
	// +kubebuilder:validation:MaxItems=128
	Routes []Route `json:"routes,omitempty"`

	// defaultTarget serves operations no route matches; without it they go to the proxy's upstream.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	DefaultTarget string `json:"defaultTarget,omitempty"`
}

// Route sends matching operations to a target.
type Route struct {
	// database to match; "*" matches any database.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self == '*' || !self.matches('[/. $]')",message="database must be '*' or a MongoDB database name without '/', '.', spaces or '$'"
	Database string `json:"database"`

	// collections to match inside the database; empty matches every collection.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=255
	Collections []string `json:"collections,omitempty"`

	// target names an entry of spec.targets.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Target string `json:"target"`
}

// NexoRouter routes operations by database and collection to named upstream targets.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=nexorouters,shortName=nxrt,categories=nexo,scope=Namespaced
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NexoRouter struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   NexoRouterSpec `json:"spec"`
	Status Status         `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// NexoRouterList contains a list of NexoRouter.
type NexoRouterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NexoRouter `json:"items"`
}

func init() { SchemeBuilder.Register(&NexoRouter{}, &NexoRouterList{}) }
