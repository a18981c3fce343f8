package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// NexoFieldEncryptionSpec encrypts fields client-side.
type NexoFieldEncryptionSpec struct {
	// keySecretRef names the Secret key holding the data encryption key.
	KeySecretRef SecretKeyReference `json:"keySecretRef"`

	// fields to encrypt.
	// +listType=map
	// +listMapKey=path
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=128
	Fields []EncryptedField `json:"fields"`
}

// EncryptedField is one encrypted field.
type EncryptedField struct {
	// path is the dotted field path.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	Path string `json:"path"`

	// algorithm: Deterministic allows equality queries, Random does not.
	// +kubebuilder:validation:Enum=Deterministic;Random
	Algorithm string `json:"algorithm"`
}

// NexoFieldEncryption encrypts fields client-side. Schema only in this build: the operator does not reconcile it.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=nexofieldencryptions,shortName=nxfenc,categories=nexo,scope=Namespaced
// +kubebuilder:printcolumn:name="Support",type=string,JSONPath=`.status.support`,description="SchemaOnly: stored, never reconciled by this bundle's operator"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NexoFieldEncryption struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec NexoFieldEncryptionSpec `json:"spec"`
	// +kubebuilder:default={support: SchemaOnly}
	Status SchemaOnlyStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// NexoFieldEncryptionList contains a list of NexoFieldEncryption.
type NexoFieldEncryptionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NexoFieldEncryption `json:"items"`
}

func init() { SchemeBuilder.Register(&NexoFieldEncryption{}, &NexoFieldEncryptionList{}) }
