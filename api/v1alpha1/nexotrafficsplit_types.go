package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// NexoTrafficSplitSpec splits traffic across weighted targets.
type NexoTrafficSplitSpec struct {
	// targets with their weights; the weights must sum to 100.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.map(t, t.weight).sum() == 100",message="target weights must sum to 100"
	Targets []WeightedTarget `json:"targets"`

	// stickiness keeps a client, or a database, on the same target once chosen.
	// +optional
	// +kubebuilder:default=None
	// +kubebuilder:validation:Enum=None;Client;Database
	Stickiness string `json:"stickiness,omitempty"`
}

// WeightedTarget is a target with a share of the traffic.
type WeightedTarget struct {
	Target `json:",inline"`

	// weight is the percentage of operations this target receives.
	Weight Percent `json:"weight"`
}

// NexoTrafficSplit splits traffic across upstream targets by weight.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=nexotrafficsplits,shortName=nxsplit,categories=nexo,scope=Namespaced
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NexoTrafficSplit struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   NexoTrafficSplitSpec `json:"spec"`
	Status Status               `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// NexoTrafficSplitList contains a list of NexoTrafficSplit.
type NexoTrafficSplitList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NexoTrafficSplit `json:"items"`
}

func init() { SchemeBuilder.Register(&NexoTrafficSplit{}, &NexoTrafficSplitList{}) }
