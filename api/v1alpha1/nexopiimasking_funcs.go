package v1alpha1

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Validate refuses two rules for one field pattern (one action per pattern).
func (m *NexoPIIMasking) Validate() field.ErrorList {
	var errs field.ErrorList
	seen := map[string]int{}
	for i, r := range m.Spec.Rules {
		if j, dup := seen[r.FieldPattern]; dup {
			errs = append(errs, field.Invalid(field.NewPath("spec", "rules").Index(i).Child("fieldPattern"), r.FieldPattern,
				fmt.Sprintf("repeats the fieldPattern of rules[%d]; keep one action per pattern", j)))
			continue
		}
		seen[r.FieldPattern] = i
	}
	return errs
}

// SecretUses is the hash salt's Secret key.
func (m *NexoPIIMasking) SecretUses() []SecretUse {
	var s secretUses
	if r := m.Spec.HashSaltSecretRef; r != nil {
		s.add(SecretUse{Name: r.Name, Field: "spec.hashSaltSecretRef", Keys: []string{r.Key}})
	}
	return s
}
