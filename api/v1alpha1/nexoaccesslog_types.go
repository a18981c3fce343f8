package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// NexoAccessLogSpec configures the access log.
type NexoAccessLogSpec struct {
	// format of each line.
	// +optional
	// +kubebuilder:default=JSON
	// +kubebuilder:validation:Enum=JSON;Text
	Format string `json:"format,omitempty"`

	// samplingPercent of operations logged.
	// +optional
	// +kubebuilder:default=100
	SamplingPercent Percent `json:"samplingPercent,omitempty"`

	// slowOperationThreshold logs every operation slower than this regardless of sampling.
	// +optional
	SlowOperationThreshold Duration `json:"slowOperationThreshold,omitempty"`

	// fields to include in each line; empty means all.
	// +optional
	// +listType=set
	// +kubebuilder:validation:items:Enum=time;client;user;database;collection;command;duration;result;bytes
	Fields []string `json:"fields,omitempty"`
}

// NexoAccessLog writes an access log line per operation.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=nexoaccesslogs,shortName=nxaccess,categories=nexo,scope=Namespaced
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NexoAccessLog struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   NexoAccessLogSpec `json:"spec"`
	Status Status            `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// NexoAccessLogList contains a list of NexoAccessLog.
type NexoAccessLogList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NexoAccessLog `json:"items"`
}

func init() { SchemeBuilder.Register(&NexoAccessLog{}, &NexoAccessLogList{}) }
