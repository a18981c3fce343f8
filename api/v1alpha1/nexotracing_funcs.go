package v1alpha1

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Validate refuses credentials in the endpoint URL and a path on an OTLP gRPC endpoint.
func (t *NexoTracing) Validate() field.ErrorList {
	var errs field.ErrorList
	endpoint := field.NewPath("spec", "endpoint")
	if err := credentialsInURL(endpoint, t.Spec.Endpoint, "headersSecretRef"); err != nil {
		return append(errs, err)
	}
	if t.Spec.Protocol == "grpc" {
		rest := t.Spec.Endpoint[strings.Index(t.Spec.Endpoint, "://")+3:]
		if i := strings.Index(rest, "/"); i >= 0 && i < len(rest)-1 {
			errs = append(errs, field.Invalid(endpoint, t.Spec.Endpoint, "an OTLP gRPC endpoint has no path; remove the path or set protocol: http"))
		}
	}
	return errs
}

// SecretUses is the exporter headers' Secret: every key is a header.
func (t *NexoTracing) SecretUses() []SecretUse {
	var s secretUses
	if r := t.Spec.HeadersSecretRef; r != nil {
		s.add(SecretUse{Name: r.Name, Field: "spec.headersSecretRef"})
	}
	return s
}
