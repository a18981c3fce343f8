package v1alpha1

// SecretUses is the license document's Secret key (the operator reads it; no proxy does).
func (l *NexoLicense) SecretUses() []SecretUse {
	var s secretUses
	s.add(SecretUse{Name: l.Spec.SecretRef.Name, Field: "spec.secretRef", Keys: []string{l.Spec.SecretRef.Key}})
	return s
}
