package v1alpha1

import "k8s.io/apimachinery/pkg/util/validation/field"

// Validate refuses credentials in the sink URL.
func (a *NexoAuditLog) Validate() field.ErrorList {
	if err := credentialsInURL(field.NewPath("spec", "sink", "url"), a.Spec.Sink.URL, "sink.authSecretRef"); err != nil {
		return field.ErrorList{err}
	}
	return nil
}

// SecretUses is the webhook token's Secret key.
func (a *NexoAuditLog) SecretUses() []SecretUse {
	var s secretUses
	if r := a.Spec.Sink.AuthSecretRef; r != nil {
		s.add(SecretUse{Name: r.Name, Field: "spec.sink.authSecretRef", Keys: []string{r.Key}})
	}
	return s
}
