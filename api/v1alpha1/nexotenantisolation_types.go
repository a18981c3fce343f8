package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// NexoTenantIsolationSpec enforces a tenant field on every request.
// +kubebuilder:validation:XValidation:rule="self.source.type != 'Claim' || has(self.source.claim)",message="source.claim is required when source.type is Claim"
type NexoTenantIsolationSpec struct {
	// tenantField is the document field (dotted path) that holds the tenant id.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Za-z_][A-Za-z0-9_]*(\\\\.[A-Za-z_][A-Za-z0-9_]*)*$')",message="tenantField must be a dotted field path such as tenantId or meta.tenant (no '$', no empty segments)"
	TenantField string `json:"tenantField"`

	// source says where the proxy learns the caller's tenant.
	Source TenantSource `json:"source"`

	// enforcement: Reject refuses operations whose filter lacks the caller's tenant; Inject adds it.
	// +optional
	// +kubebuilder:default=Reject
	// +kubebuilder:validation:Enum=Reject;Inject
	Enforcement string `json:"enforcement,omitempty"`

	// exemptDatabases are not tenant-scoped (for example shared reference data).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	ExemptDatabases []string `json:"exemptDatabases,omitempty"`
}

// TenantSource identifies the caller's tenant.
type TenantSource struct {
	// type of source.
	// +kubebuilder:validation:Enum=Username;CertificateSubject;Claim
	Type string `json:"type"`

	// claim names the authentication claim that carries the tenant, when type is Claim.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Claim string `json:"claim,omitempty"`
}

// NexoTenantIsolation enforces a tenant field on every request.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=nexotenantisolations,shortName=nxtenant,categories=nexo,scope=Namespaced
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NexoTenantIsolation struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   NexoTenantIsolationSpec `json:"spec"`
	Status Status                  `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// NexoTenantIsolationList contains a list of NexoTenantIsolation.
type NexoTenantIsolationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NexoTenantIsolation `json:"items"`
}

func init() { SchemeBuilder.Register(&NexoTenantIsolation{}, &NexoTenantIsolationList{}) }
