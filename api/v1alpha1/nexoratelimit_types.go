package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// NexoRateLimitSpec limits operations per client.
// +kubebuilder:validation:XValidation:rule="!has(self.burst) || self.burst >= self.operationsPerSecond",message="burst must be at least operationsPerSecond"
type NexoRateLimitSpec struct {
	// operationsPerSecond each key may sustain.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	OperationsPerSecond int32 `json:"operationsPerSecond"`

	// burst is how many operations may run above the sustained rate at once.
	// +optional
	// +kubebuilder:validation:Minimum=1
	Burst int32 `json:"burst,omitempty"`

	// key groups operations for limiting.
	// +optional
	// +kubebuilder:default=Client
	// +kubebuilder:validation:Enum=Client;User;Database
	Key string `json:"key,omitempty"`

	// action when the limit is exceeded: Reject answers with an error, Delay queues the operation.
	// +optional
	// +kubebuilder:default=Reject
	// +kubebuilder:validation:Enum=Reject;Delay
	Action string `json:"action,omitempty"`
}

// NexoRateLimit limits operations per client.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=nexoratelimits,shortName=nxrl,categories=nexo,scope=Namespaced
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NexoRateLimit struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   NexoRateLimitSpec `json:"spec"`
	Status Status            `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// NexoRateLimitList contains a list of NexoRateLimit.
type NexoRateLimitList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NexoRateLimit `json:"items"`
}

func init() { SchemeBuilder.Register(&NexoRateLimit{}, &NexoRateLimitList{}) }
