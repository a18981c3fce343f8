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

// SecretUses are the upstream's CA, the serving certificate and the client CA.
func (p *NexoProxy) SecretUses() []SecretUse {
	var s secretUses
	s.targetCA(field.NewPath("spec", "upstream"), p.Spec.Upstream)
	if p.Spec.TLS != nil {
		s.add(SecretUse{Name: p.Spec.TLS.SecretRef.Name, Field: "spec.tls.secretRef", Keys: []string{KeyTLSCert, KeyTLSKey}})
		if r := p.Spec.TLS.ClientCASecretRef; r != nil {
			s.add(SecretUse{Name: r.Name, Field: "spec.tls.clientCASecretRef", Keys: []string{KeyCABundle}})
		}
	}
	return s
}
