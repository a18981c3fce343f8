package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// NexoSchemaValidationSpec validates written documents.
type NexoSchemaValidationSpec struct {
	// rules per collection.
	// +listType=map
	// +listMapKey=collection
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=256
	Rules []SchemaRule `json:"rules"`

	// action when a document fails validation.
	// +optional
	// +kubebuilder:default=Reject
	// +kubebuilder:validation:Enum=Reject;Warn
	Action string `json:"action,omitempty"`
}

// SchemaRule lists required fields of a collection's documents.
type SchemaRule struct {
	// collection as database.collection.
	// +kubebuilder:validation:MaxLength=255
	// +kubebuilder:validation:Pattern=`^[^.$ ]+\.[^$ ]+$`
	Collection string `json:"collection"`

	// requiredFields every written document must have.
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	RequiredFields []string `json:"requiredFields"`
}

// NexoSchemaValidation validates written documents against a schema. Schema only in this build: the operator does not reconcile it.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=nexoschemavalidations,shortName=nxschema,categories=nexo,scope=Namespaced
// +kubebuilder:printcolumn:name="Support",type=string,JSONPath=`.status.support`,description="SchemaOnly: stored, never reconciled by this bundle's operator"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NexoSchemaValidation struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec NexoSchemaValidationSpec `json:"spec"`
	// +kubebuilder:default={support: SchemaOnly}
	Status SchemaOnlyStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// NexoSchemaValidationList contains a list of NexoSchemaValidation.
type NexoSchemaValidationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NexoSchemaValidation `json:"items"`
}

func init() { SchemeBuilder.Register(&NexoSchemaValidation{}, &NexoSchemaValidationList{}) }
