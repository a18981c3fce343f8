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

// SecretNames is the hash salt's Secret.
func (m *NexoPIIMasking) SecretNames() []string {
	var s secretNames
	if m.Spec.HashSaltSecretRef != nil {
		s.add(m.Spec.HashSaltSecretRef.Name)
	}
	return s
}
