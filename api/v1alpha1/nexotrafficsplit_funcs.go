package v1alpha1

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Validate refuses two targets with one address (the weights would split traffic to one place).
func (s *NexoTrafficSplit) Validate() field.ErrorList {
	var errs field.ErrorList
	seen := map[Address]string{}
	for i, t := range s.Spec.Targets {
		if prev, dup := seen[t.Address]; dup {
			dup := field.Duplicate(field.NewPath("spec", "targets").Index(i).Child("address"), t.Address)
			dup.Detail = fmt.Sprintf("targets %s and %s share address %s; merge them into one target", prev, t.Name, t.Address)
			errs = append(errs, dup)
			continue
		}
		seen[t.Address] = t.Name
	}
	return errs
}

// SecretUses are the targets' CA Secrets.
func (s *NexoTrafficSplit) SecretUses() []SecretUse {
	var out secretUses
	for i, t := range s.Spec.Targets {
		out.targetCA(field.NewPath("spec", "targets").Index(i), t.Target)
	}
	return out
}
