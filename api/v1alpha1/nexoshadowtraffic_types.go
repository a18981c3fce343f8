package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// NexoShadowTrafficSpec mirrors traffic to a shadow upstream.
// +kubebuilder:validation:XValidation:rule="self.primary.address != self.shadow.address",message="shadow must be a different address than primary"
type NexoShadowTrafficSpec struct {
	// primary serves the operations and answers clients.
	Primary Target `json:"primary"`

	// shadow receives a copy of the operations; its replies are discarded.
	Shadow Target `json:"shadow"`

	// samplingPercent of operations mirrored.
	// +optional
	// +kubebuilder:default=100
	SamplingPercent Percent `json:"samplingPercent,omitempty"`

	// readsOnly mirrors only read operations.
	// +optional
	// +kubebuilder:default=true
	ReadsOnly bool `json:"readsOnly,omitempty"`
}

// NexoShadowTraffic mirrors traffic to a shadow upstream. Schema only in this build: the operator does not reconcile it.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=nexoshadowtraffics,shortName=nxshadow,categories=nexo,scope=Namespaced
// +kubebuilder:printcolumn:name="Support",type=string,JSONPath=`.status.support`,description="SchemaOnly: stored, never reconciled by this bundle's operator"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NexoShadowTraffic struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec NexoShadowTrafficSpec `json:"spec"`
	// +kubebuilder:default={support: SchemaOnly}
	Status SchemaOnlyStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// NexoShadowTrafficList contains a list of NexoShadowTraffic.
type NexoShadowTrafficList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NexoShadowTraffic `json:"items"`
}

func init() { SchemeBuilder.Register(&NexoShadowTraffic{}, &NexoShadowTrafficList{}) }
