package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// NexoResponseLimitSpec caps replies.
// +kubebuilder:validation:XValidation:rule="has(self.maxDocuments) || has(self.maxBytes)",message="set maxDocuments, maxBytes or both"
type NexoResponseLimitSpec struct {
	// maxDocuments per reply.
	// +optional
	// +kubebuilder:validation:Minimum=1
	MaxDocuments *int32 `json:"maxDocuments,omitempty"`

	// maxBytes per reply; at least 1024.
	// +optional
	// +kubebuilder:validation:Minimum=1024
	// +kubebuilder:validation:Maximum=1073741824
	MaxBytes *int64 `json:"maxBytes,omitempty"`

	// action when a reply exceeds a limit.
	// +optional
	// +kubebuilder:default=Truncate
	// +kubebuilder:validation:Enum=Truncate;Reject
	Action string `json:"action,omitempty"`
}

// NexoResponseLimit caps documents and bytes per reply.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=nexoresponselimits,shortName=nxresp,categories=nexo,scope=Namespaced
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NexoResponseLimit struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   NexoResponseLimitSpec `json:"spec"`
	Status Status                `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// NexoResponseLimitList contains a list of NexoResponseLimit.
type NexoResponseLimitList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NexoResponseLimit `json:"items"`
}

func init() { SchemeBuilder.Register(&NexoResponseLimit{}, &NexoResponseLimitList{}) }
