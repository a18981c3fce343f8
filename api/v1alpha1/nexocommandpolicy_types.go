package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// NexoCommandPolicySpec allows or denies MongoDB commands.
// +kubebuilder:validation:XValidation:rule="self.defaultAction != 'Deny' || size(self.allow) > 0",message="defaultAction Deny needs at least one allowed command, or every command is refused"
// +kubebuilder:validation:XValidation:rule="!self.allow.exists(c, c in self.deny)",message="a command cannot be in both allow and deny"
type NexoCommandPolicySpec struct {
	// defaultAction for commands in neither list.
	// +kubebuilder:validation:Enum=Allow;Deny
	DefaultAction string `json:"defaultAction"`

	// allow lists command names (for example find, aggregate).
	// +optional
	// +kubebuilder:default={}
	// +listType=set
	// +kubebuilder:validation:MaxItems=128
	// +kubebuilder:validation:items:Pattern=`^[A-Za-z][A-Za-z0-9]*$`
	// +kubebuilder:validation:items:MaxLength=64
	Allow []string `json:"allow"`

	// deny lists command names (for example dropDatabase).
	// +optional
	// +kubebuilder:default={}
	// +listType=set
	// +kubebuilder:validation:MaxItems=128
	// +kubebuilder:validation:items:Pattern=`^[A-Za-z][A-Za-z0-9]*$`
	// +kubebuilder:validation:items:MaxLength=64
	Deny []string `json:"deny"`
}

// NexoCommandPolicy allows or denies MongoDB commands.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=nexocommandpolicies,shortName=nxcmd,categories=nexo,scope=Namespaced
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NexoCommandPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   NexoCommandPolicySpec `json:"spec"`
	Status Status                `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// NexoCommandPolicyList contains a list of NexoCommandPolicy.
type NexoCommandPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NexoCommandPolicy `json:"items"`
}

func init() { SchemeBuilder.Register(&NexoCommandPolicy{}, &NexoCommandPolicyList{}) }
