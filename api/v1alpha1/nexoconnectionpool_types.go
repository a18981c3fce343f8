package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// NexoConnectionPoolSpec sizes the upstream pool.
// +kubebuilder:validation:XValidation:rule="!has(self.minSize) || self.minSize <= self.maxSize",message="minSize must not exceed maxSize"
type NexoConnectionPoolSpec struct {
	// minSize connections kept open per upstream.
	// +optional
	// +kubebuilder:validation:Minimum=0
	MinSize int32 `json:"minSize,omitempty"`

	// maxSize connections per upstream.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	MaxSize int32 `json:"maxSize"`

	// idleTimeout closes connections unused for this long.
	// +optional
	// +kubebuilder:default="5m"
	IdleTimeout Duration `json:"idleTimeout,omitempty"`

	// waitQueueTimeout fails an operation that waited this long for a connection.
	// +optional
	// +kubebuilder:default="10s"
	WaitQueueTimeout Duration `json:"waitQueueTimeout,omitempty"`
}

// NexoConnectionPool sizes the upstream connection pool.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=nexoconnectionpools,shortName=nxpool,categories=nexo,scope=Namespaced
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NexoConnectionPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   NexoConnectionPoolSpec `json:"spec"`
	Status Status                 `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// NexoConnectionPoolList contains a list of NexoConnectionPool.
type NexoConnectionPoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NexoConnectionPool `json:"items"`
}

func init() { SchemeBuilder.Register(&NexoConnectionPool{}, &NexoConnectionPoolList{}) }
