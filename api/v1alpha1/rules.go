package v1alpha1

import (
	"net/url"
	"slices"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// A kind's rules live beside its type, in <kind>_funcs.go: the checks its CRD schema cannot
// express (Validate), the Secrets of its own namespace it references (SecretUses) and, for a
// NexoPipeline, its references (Refs). The operator, preflight and nexoctl status all use them.

// Validator is implemented by kinds with rules the CRD schema cannot express. A kind without
// it is valid once the API server admitted it.
// +kubebuilder:object:generate=false
type Validator interface {
	Validate() field.ErrorList
}

// SecretReferrer is implemented by kinds that reference Secrets in their own namespace; a
// change to one of them re-reconciles every proxy that uses the object, and the proxy pod
// mounts each one into the container that uses it (docs/runtime.md, "Secrets").
// +kubebuilder:object:generate=false
type SecretReferrer interface {
	SecretUses() []SecretUse
}

// SecretUse is one reference to a Secret and what the runtime reads of it.
// +kubebuilder:object:generate=false
type SecretUse struct {
	// Name of the Secret, in the object's namespace.
	Name string
	// Field is the reference's path in the object, for example spec.mappings[0].credentialsSecretRef.
	Field string
	// Keys the runtime reads; nil: every key of the Secret (exporter headers).
	Keys []string
	// Upstream: the Secret serves the connection to an upstream (its CA, the credentials the
	// proxy logs in with), so the component that talks to the upstream (egress) reads it,
	// wherever the referencing object runs.
	Upstream bool
}

// Keys of the Secrets the runtime reads (the kubernetes.io/tls and CA bundle conventions, and
// NexoAuthPolicy's basic-auth pair).
const (
	KeyTLSCert  = "tls.crt"
	KeyTLSKey   = "tls.key"
	KeyCABundle = "ca.crt"
	KeyUsername = "username"
	KeyPassword = "password"
)

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

// SecretUsesOf lists the Secret references of obj, if any.
func SecretUsesOf(obj any) []SecretUse {
	if s, ok := obj.(SecretReferrer); ok {
		return s.SecretUses()
	}
	return nil
}

// SecretNamesOf lists the Secrets obj references in its namespace, each once, in reference order.
func SecretNamesOf(obj any) []string {
	var names []string
	for _, u := range SecretUsesOf(obj) {
		if !slices.Contains(names, u.Name) {
			names = append(names, u.Name)
		}
	}
	return names
}

// secretUses collects references with a name.
type secretUses []SecretUse

func (s *secretUses) add(u SecretUse) {
	if u.Name != "" {
		*s = append(*s, u)
	}
}

// targetCA adds the CA Secret of a target (an upstream) at path.
func (s *secretUses) targetCA(path *field.Path, t Target) {
	if t.TLS != nil && t.TLS.CASecretRef != nil {
		s.add(SecretUse{Name: t.TLS.CASecretRef.Name, Field: path.Child("tls", "caSecretRef").String(), Keys: []string{KeyCABundle}, Upstream: true})
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
