package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// NexoLicenseSpec points at a signed offline license. The license document is kept in a
// Secret; the operator verifies its signature and shows only its claims in status.
type NexoLicenseSpec struct {
	// secretRef names the Secret key holding the signed license document.
	SecretRef SecretKeyReference `json:"secretRef"`

	// expectedLicensee, when set, must equal the licensee inside the signed document; it guards
	// against installing another customer's license.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	ExpectedLicensee string `json:"expectedLicensee,omitempty"`

	// renewBefore warns (Ready stays True, reason ExpiringSoon) this long before expiry.
	// +optional
	// +kubebuilder:default="720h"
	RenewBefore Duration `json:"renewBefore,omitempty"`
}

// NexoLicenseStatus shows the verified claims of the license, never its signed material.
type NexoLicenseStatus struct {
	Status `json:",inline"`

	// licensee the license was issued to.
	// +optional
	Licensee string `json:"licensee,omitempty"`

	// expiresAt is when the license stops entitling anything.
	// +optional
	ExpiresAt *metav1.Time `json:"expiresAt,omitempty"`

	// entitlements are the step kinds the license allows.
	// +optional
	// +listType=set
	Entitlements []string `json:"entitlements,omitempty"`

	// maxProxies is how many NexoProxies the license covers: all NexoLicenses holding the same
	// license document, in any namespace, share these slots.
	// +optional
	MaxProxies int32 `json:"maxProxies,omitempty"`

	// documentID identifies the license document (a hash of its signed claims, not the
	// document): NexoLicenses with the same documentID share maxProxies.
	// +optional
	DocumentID string `json:"documentID,omitempty"`
}

// NexoLicense is a signed offline license: licensee, expiry, entitlements and maximum proxies.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=nexolicenses,shortName=nxlic,categories=nexo,scope=Namespaced
// +kubebuilder:printcolumn:name="Licensee",type=string,JSONPath=`.status.licensee`
// +kubebuilder:printcolumn:name="Expires",type=string,JSONPath=`.status.expiresAt`,description="When the license expires (a date: an age column cannot show the future)"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NexoLicense struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   NexoLicenseSpec   `json:"spec"`
	Status NexoLicenseStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// NexoLicenseList contains a list of NexoLicense.
type NexoLicenseList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NexoLicense `json:"items"`
}

func init() { SchemeBuilder.Register(&NexoLicense{}, &NexoLicenseList{}) }
