package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// NexoQueryGuardSpec guards query shapes.
// +kubebuilder:validation:XValidation:rule="has(self.maxFilterDepth) || size(self.denyOperators) > 0 || (has(self.requireIndexedFilter) && self.requireIndexedFilter)",message="set at least one guard: maxFilterDepth, denyOperators or requireIndexedFilter"
type NexoQueryGuardSpec struct {
	// maxFilterDepth is the deepest nesting a filter may have.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	MaxFilterDepth int32 `json:"maxFilterDepth,omitempty"`

	// denyOperators are query operators refused, for example $where.
	// +optional
	// +kubebuilder:default={}
	// +listType=set
	// +kubebuilder:validation:items:Pattern=`^\$[A-Za-z]+$`
	DenyOperators []string `json:"denyOperators"`

	// requireIndexedFilter refuses collection scans.
	// +optional
	RequireIndexedFilter bool `json:"requireIndexedFilter,omitempty"`
}

// NexoQueryGuard guards query shapes. Schema only in this build: the operator does not reconcile it.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=nexoqueryguards,shortName=nxqg,categories=nexo,scope=Namespaced
// +kubebuilder:printcolumn:name="Support",type=string,JSONPath=`.status.support`,description="SchemaOnly: stored, never reconciled by this bundle's operator"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NexoQueryGuard struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec NexoQueryGuardSpec `json:"spec"`
	// +kubebuilder:default={support: SchemaOnly}
	Status SchemaOnlyStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// NexoQueryGuardList contains a list of NexoQueryGuard.
type NexoQueryGuardList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NexoQueryGuard `json:"items"`
}

func init() { SchemeBuilder.Register(&NexoQueryGuard{}, &NexoQueryGuardList{}) }
