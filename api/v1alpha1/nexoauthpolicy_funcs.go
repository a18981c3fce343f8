package v1alpha1

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Validate refuses a mapping that repeats an earlier one's client identity (it can never match).
func (a *NexoAuthPolicy) Validate() field.ErrorList {
	var errs field.ErrorList
	seen := map[string]int{}
	for i, m := range a.Spec.Mappings {
		id := "username " + m.Username
		if m.CertificateSubject != "" {
			id = "certificateSubject " + m.CertificateSubject
		}
		if j, dup := seen[id]; dup {
			errs = append(errs, field.Invalid(field.NewPath("spec", "mappings").Index(i), id,
				fmt.Sprintf("repeats %s of mappings[%d] and can never match; remove one", id, j)))
			continue
		}
		seen[id] = i
	}
	return errs
}

// SecretUses are the mappings' upstream credentials: the username and password keys, read by
// the component that logs in to the upstream.
func (a *NexoAuthPolicy) SecretUses() []SecretUse {
	var s secretUses
	for i, m := range a.Spec.Mappings {
		s.add(SecretUse{Name: m.CredentialsSecretRef.Name, Field: fmt.Sprintf("spec.mappings[%d].credentialsSecretRef", i),
			Keys: []string{KeyUsername, KeyPassword}, Upstream: true})
	}
	return s
}
