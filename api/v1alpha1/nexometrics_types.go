package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// NexoMetricsSpec exposes Prometheus metrics.
type NexoMetricsSpec struct {
	// port of the metrics endpoint; it is added to the proxy Service as "metrics".
	// +optional
	// +kubebuilder:default=9216
	// +kubebuilder:validation:Minimum=1024
	// +kubebuilder:validation:Maximum=65535
	// +kubebuilder:validation:XValidation:rule="self != 27017",message="port 27017 is the MongoDB listener; pick another metrics port, for example 9216"
	Port int32 `json:"port,omitempty"`

	// path of the metrics endpoint.
	// +optional
	// +kubebuilder:default="/metrics"
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule="self.startsWith('/') && !self.contains(' ')",message="path must start with '/' and contain no spaces, for example /metrics"
	Path string `json:"path,omitempty"`

	// commandLatencyBuckets are histogram bucket bounds in milliseconds, ascending.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:XValidation:rule="self.isSorted() && self.all(x, self.exists_one(y, y == x))",message="commandLatencyBuckets must be strictly ascending"
	CommandLatencyBuckets []int32 `json:"commandLatencyBuckets,omitempty"`
}

// NexoMetrics exposes a Prometheus endpoint and adds a metrics port to the proxy Service.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=nexometrics,shortName=nxmet,categories=nexo,scope=Namespaced
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NexoMetrics struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   NexoMetricsSpec `json:"spec"`
	Status Status          `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// NexoMetricsList contains a list of NexoMetrics.
type NexoMetricsList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NexoMetrics `json:"items"`
}

func init() { SchemeBuilder.Register(&NexoMetrics{}, &NexoMetricsList{}) }
