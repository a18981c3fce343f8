package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// NexoPIIMaskingSpec masks fields in replies.
// +kubebuilder:validation:XValidation:rule="!self.rules.exists(r, r.action == 'Hash') || has(self.hashSaltSecretRef)",message="rules with action Hash need spec.hashSaltSecretRef, so hashes cannot be reversed by lookup"
type NexoPIIMaskingSpec struct {
	// rules are applied in order to every returned document.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=128
	Rules []MaskingRule `json:"rules"`

	// hashSaltSecretRef names the Secret key that salts Hash rules; required when any rule hashes.
	// +optional
	HashSaltSecretRef *SecretKeyReference `json:"hashSaltSecretRef,omitempty"`
}

// MaskingRule masks the fields matching a pattern.
// +kubebuilder:validation:XValidation:rule="self.action == 'PartialMask' || !has(self.keepLast)",message="keepLast applies only to action PartialMask"
// +kubebuilder:validation:XValidation:rule="self.action != 'PartialMask' || has(self.keepLast)",message="action PartialMask needs keepLast (how many trailing characters stay visible)"
type MaskingRule struct {
	// fieldPattern is a dotted path; '*' matches one segment, for example customers.*.email.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	// +kubebuilder:validation:XValidation:rule="self.matches('^(\\\\*|[A-Za-z_][A-Za-z0-9_]*)(\\\\.(\\\\*|[A-Za-z_][A-Za-z0-9_]*))*$')",message="fieldPattern must be a dotted path of field names or '*', for example customers.*.email"
	FieldPattern string `json:"fieldPattern"`

	// action taken on matching values.
	// +kubebuilder:validation:Enum=Redact;Hash;PartialMask
	Action string `json:"action"`

	// keepLast characters stay visible with PartialMask.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=16
	KeepLast *int32 `json:"keepLast,omitempty"`
}

// NexoPIIMasking redacts, hashes or partially masks fields in replies.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=nexopiimaskings,shortName=nxpii,categories=nexo,scope=Namespaced
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NexoPIIMasking struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   NexoPIIMaskingSpec `json:"spec"`
	Status Status             `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// NexoPIIMaskingList contains a list of NexoPIIMasking.
type NexoPIIMaskingList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NexoPIIMasking `json:"items"`
}

func init() { SchemeBuilder.Register(&NexoPIIMasking{}, &NexoPIIMaskingList{}) }
