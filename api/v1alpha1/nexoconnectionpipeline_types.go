package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// NexoConnectionPipelineSpec orders connection-level steps.
type NexoConnectionPipelineSpec struct {
	// steps run in order when a client connects.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.all(x, self.exists_one(y, y.kind == x.kind && y.name == x.name))",message="steps must not list the same {kind, name} twice; remove the duplicate"
	// +kubebuilder:validation:XValidation:rule="!self.exists(s, s.kind == 'NexoConnectionPipeline')",message="a connection pipeline cannot contain another NexoConnectionPipeline"
	Steps []ConnectionStepRef `json:"steps"`
}

// NexoConnectionPipeline is an ordered connection-level pipeline. Schema only in this build: the operator does not reconcile it.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=nexoconnectionpipelines,shortName=nxconnpipe,categories=nexo,scope=Namespaced
// +kubebuilder:printcolumn:name="Support",type=string,JSONPath=`.status.support`,description="SchemaOnly: stored, never reconciled by this bundle's operator"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NexoConnectionPipeline struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec NexoConnectionPipelineSpec `json:"spec"`
	// +kubebuilder:default={support: SchemaOnly}
	Status SchemaOnlyStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// NexoConnectionPipelineList contains a list of NexoConnectionPipeline.
type NexoConnectionPipelineList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NexoConnectionPipeline `json:"items"`
}

func init() { SchemeBuilder.Register(&NexoConnectionPipeline{}, &NexoConnectionPipelineList{}) }
