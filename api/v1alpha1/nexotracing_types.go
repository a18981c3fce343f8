package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// NexoTracingSpec exports traces over OTLP.
type NexoTracingSpec struct {
	// endpoint of the OTLP collector, an http or https URL.
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="isURL(self) && (self.startsWith('http://') || self.startsWith('https://'))",message="endpoint must be an http:// or https:// URL, for example http://otel-collector.observability:4317"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[a-zA-Z][a-zA-Z0-9+.-]*://[^/?#]*@')",message="endpoint must not carry credentials (user:password@): put them in a Secret and name it in headersSecretRef"
	Endpoint string `json:"endpoint"`

	// protocol of the OTLP exporter.
	// +optional
	// +kubebuilder:default=grpc
	// +kubebuilder:validation:Enum=grpc;http
	Protocol string `json:"protocol,omitempty"`

	// samplingPercent of operations traced.
	// +optional
	// +kubebuilder:default=10
	SamplingPercent Percent `json:"samplingPercent,omitempty"`

	// headersSecretRef names a Secret whose keys are sent as exporter headers (for example an API key).
	// +optional
	HeadersSecretRef *SecretReference `json:"headersSecretRef,omitempty"`
}

// NexoTracing exports traces to an OTLP endpoint.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=nexotracings,shortName=nxtrace,categories=nexo,scope=Namespaced
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NexoTracing struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   NexoTracingSpec `json:"spec"`
	Status Status          `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// NexoTracingList contains a list of NexoTracing.
type NexoTracingList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NexoTracing `json:"items"`
}

func init() { SchemeBuilder.Register(&NexoTracing{}, &NexoTracingList{}) }
