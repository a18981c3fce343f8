package controllers

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
)

// invalid is a failed check: a condition reason and a message saying what to fix.
type invalid struct{ reason, message string }

// invalidOf turns a kind's failed Validate (api/v1alpha1/<kind>_funcs.go) into a condition
// reason and message; nil when errs is empty.
func invalidOf(errs field.ErrorList) *invalid {
	if len(errs) == 0 {
		return nil
	}
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return &invalid{nexov1alpha1.ReasonFor(errs), strings.Join(msgs, "; ")}
}
