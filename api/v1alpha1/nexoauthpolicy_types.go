package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// NexoAuthPolicySpec maps client identities to upstream credentials.
type NexoAuthPolicySpec struct {
	// mappings are evaluated in order; the first matching client wins.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=256
	Mappings []CredentialMapping `json:"mappings"`

	// unmatched: Reject refuses clients no mapping matches; Passthrough forwards their own credentials.
	// +optional
	// +kubebuilder:default=Reject
	// +kubebuilder:validation:Enum=Reject;Passthrough
	Unmatched string `json:"unmatched,omitempty"`
}

// CredentialMapping maps one client identity to upstream credentials.
// +kubebuilder:validation:XValidation:rule="has(self.username) != has(self.certificateSubject)",message="set exactly one of username or certificateSubject"
type CredentialMapping struct {
	// username of the client, as it authenticates to the proxy.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Username string `json:"username,omitempty"`

	// certificateSubject of the client's TLS certificate, for example CN=app,O=example.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	CertificateSubject string `json:"certificateSubject,omitempty"`

	// credentialsSecretRef names a Secret with username and password keys for the upstream.
	CredentialsSecretRef SecretReference `json:"credentialsSecretRef"`
}

// NexoAuthPolicy maps client identities to upstream credentials held in Secrets.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=nexoauthpolicies,shortName=nxauth,categories=nexo,scope=Namespaced
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NexoAuthPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   NexoAuthPolicySpec `json:"spec"`
	Status Status             `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// NexoAuthPolicyList contains a list of NexoAuthPolicy.
type NexoAuthPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NexoAuthPolicy `json:"items"`
}

func init() { SchemeBuilder.Register(&NexoAuthPolicy{}, &NexoAuthPolicyList{}) }
