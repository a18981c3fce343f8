package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// NexoAuditLogSpec audits command classes.
type NexoAuditLogSpec struct {
	// commandClasses to audit.
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:items:Enum=Read;Write;Admin;Auth;DDL
	CommandClasses []string `json:"commandClasses"`

	// sink receives audit records.
	Sink AuditSink `json:"sink"`
}

// AuditSink is where audit records go.
// +kubebuilder:validation:XValidation:rule="self.type != 'Webhook' || has(self.url)",message="sink.url is required when sink.type is Webhook"
// +kubebuilder:validation:XValidation:rule="self.type == 'Webhook' || !has(self.url)",message="sink.url applies only to sink.type Webhook"
type AuditSink struct {
	// type of sink.
	// +kubebuilder:validation:Enum=Stdout;Webhook
	Type string `json:"type"`

	// url of the webhook; https is required.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="isURL(self) && self.startsWith('https://')",message="sink.url must be an https:// URL"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[a-zA-Z][a-zA-Z0-9+.-]*://[^/?#]*@')",message="sink.url must not carry credentials (user:password@): put the token in a Secret and name it in authSecretRef"
	URL string `json:"url,omitempty"`

	// authSecretRef names a Secret whose token key is sent as a bearer token to the webhook.
	// +optional
	AuthSecretRef *SecretKeyReference `json:"authSecretRef,omitempty"`
}

// NexoAuditLog audits classes of commands to a sink.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=nexoauditlogs,shortName=nxaudit,categories=nexo,scope=Namespaced
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NexoAuditLog struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   NexoAuditLogSpec `json:"spec"`
	Status Status           `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// NexoAuditLogList contains a list of NexoAuditLog.
type NexoAuditLogList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NexoAuditLog `json:"items"`
}

func init() { SchemeBuilder.Register(&NexoAuditLog{}, &NexoAuditLogList{}) }
