package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// NexoConnectionLimitSpec caps client connections.
// +kubebuilder:validation:XValidation:rule="!has(self.perClientMaxConnections) || self.perClientMaxConnections <= self.maxConnections",message="perClientMaxConnections must not exceed maxConnections"
type NexoConnectionLimitSpec struct {
	// maxConnections per proxy pod.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	MaxConnections int32 `json:"maxConnections"`

	// perClientMaxConnections per client address.
	// +optional
	// +kubebuilder:validation:Minimum=1
	PerClientMaxConnections int32 `json:"perClientMaxConnections,omitempty"`
}

// NexoConnectionLimit caps client connections in total and per client.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=nexoconnectionlimits,shortName=nxconn,categories=nexo,scope=Namespaced
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NexoConnectionLimit struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   NexoConnectionLimitSpec `json:"spec"`
	Status Status                  `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// NexoConnectionLimitList contains a list of NexoConnectionLimit.
type NexoConnectionLimitList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NexoConnectionLimit `json:"items"`
}

func init() { SchemeBuilder.Register(&NexoConnectionLimit{}, &NexoConnectionLimitList{}) }
