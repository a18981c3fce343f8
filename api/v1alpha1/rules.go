package v1alpha1

import (
	"net/url"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// A kind's rules live beside its type, in <kind>_funcs.go: the checks its CRD schema cannot
// express (Validate), the Secrets of its own namespace it references (SecretNames) and, for a
// NexoPipeline, its references (Refs). The operator, preflight and nexoctl status all use them.

// Validator is implemented by kinds with rules the CRD schema cannot express. A kind without
// it is valid once the API server admitted it.
// +kubebuilder:object:generate=false
type Validator interface {
	Validate() field.ErrorList
}

// SecretReferrer is implemented by kinds that reference Secrets in their own namespace; a
// change to one of them re-reconciles every proxy that uses the object.
// +kubebuilder:object:generate=false
type SecretReferrer interface {
	SecretNames() []string
}

// ReasonFor is the condition reason of a failed Validate: an error on a reference's kind that
// this build does not reconcile (field.Forbidden) is UnsupportedReference, one that names no
// kind allowed there (field.NotSupported) is InvalidReference and outranks it; anything else
// is InvalidSpec. An empty list has no reason.
func ReasonFor(errs field.ErrorList) string {
	reason := ""
	for _, e := range errs {
		switch {
		case e.Type == field.ErrorTypeNotSupported:
			return ReasonInvalidReference
		case e.Type == field.ErrorTypeForbidden:
			reason = ReasonUnsupportedReference
		case reason == "":
			reason = ReasonInvalidSpec
		}
	}
	return reason
}

// Validate runs obj's rules, if it has any.
func Validate(obj any) field.ErrorList {
	if v, ok := obj.(Validator); ok {
		return v.Validate()
	}
	return nil
}

// SecretNamesOf lists the Secrets obj references in its namespace, if any.
func SecretNamesOf(obj any) []string {
	if s, ok := obj.(SecretReferrer); ok {
		return s.SecretNames()
	}
	return nil
}

// secretNames collects non-empty names.
type secretNames []string

func (s *secretNames) add(name string) {
	if name != "" {
		*s = append(*s, name)
	}
}

func (s *secretNames) targetCA(t Target) {
	if t.TLS != nil && t.TLS.CASecretRef != nil {
		s.add(t.TLS.CASecretRef.Name)
	}
}

// credentialsInURL catches objects stored before the CRD refused credentials in URLs (credentials
// come only through Secret references). The message never repeats the URL.
func credentialsInURL(path *field.Path, raw, secretField string) *field.Error {
	if u, err := url.Parse(raw); err == nil && u.User != nil {
		return field.Invalid(path, "(redacted)", "carries credentials (user:password@); put them in a Secret and name it in "+secretField)
	}
	return nil
}
