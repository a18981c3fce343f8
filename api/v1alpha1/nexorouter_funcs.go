package v1alpha1

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Validate refuses a route that can never match: an earlier route already matches its database
// (or every database) and all its collections.
func (r *NexoRouter) Validate() field.ErrorList {
	var errs field.ErrorList
	routes := field.NewPath("spec", "routes")
	for i, later := range r.Spec.Routes {
		for j, earlier := range r.Spec.Routes[:i] {
			sameDB := earlier.Database == "*" || earlier.Database == later.Database
			covers := len(earlier.Collections) == 0 ||
				(len(later.Collections) > 0 && !slices.ContainsFunc(later.Collections, func(c string) bool { return !slices.Contains(earlier.Collections, c) }))
			if sameDB && covers {
				errs = append(errs, field.Invalid(routes.Index(i), later.Database,
					fmt.Sprintf("can never match: routes[%d] already matches database %q and its collections; reorder or remove it", j, later.Database)))
				break
			}
		}
	}
	return errs
}

// SecretUses are the targets' CA Secrets.
func (r *NexoRouter) SecretUses() []SecretUse {
	var s secretUses
	for i, t := range r.Spec.Targets {
		s.targetCA(field.NewPath("spec", "targets").Index(i), t)
	}
	return s
}
