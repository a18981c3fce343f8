package v1alpha1

import (
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/nexo-io/nexo-edge/catalog"
)

// Validate checks the observability references' kinds against the catalog (see CheckRefKind).
func (p *NexoProxy) Validate() field.ErrorList {
	var errs field.ErrorList
	for i, ref := range p.Spec.ObservabilityRefs {
		if err := CheckRefKind(field.NewPath("spec", "observabilityRefs").Index(i).Child("kind"), catalog.SlotObservability, ref.Kind); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// SecretNames are the upstream's CA, the serving certificate and the client CA.
func (p *NexoProxy) SecretNames() []string {
	var s secretNames
	s.targetCA(p.Spec.Upstream)
	if p.Spec.TLS != nil {
		s.add(p.Spec.TLS.SecretRef.Name)
		if p.Spec.TLS.ClientCASecretRef != nil {
			s.add(p.Spec.TLS.ClientCASecretRef.Name)
		}
	}
	return s
}
