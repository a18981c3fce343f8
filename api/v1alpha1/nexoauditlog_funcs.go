package v1alpha1

import "k8s.io/apimachinery/pkg/util/validation/field"

// Validate refuses credentials in the sink URL.
func (a *NexoAuditLog) Validate() field.ErrorList {
	if err := credentialsInURL(field.NewPath("spec", "sink", "url"), a.Spec.Sink.URL, "sink.authSecretRef"); err != nil {
		return field.ErrorList{err}
	}
	return nil
}

// SecretNames is the webhook token's Secret.
func (a *NexoAuditLog) SecretNames() []string {
	var s secretNames
	if a.Spec.Sink.AuthSecretRef != nil {
		s.add(a.Spec.Sink.AuthSecretRef.Name)
	}
	return s
}
