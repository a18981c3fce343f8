package v1alpha1

// SecretNames is the license document's Secret.
func (l *NexoLicense) SecretNames() []string {
	var s secretNames
	s.add(l.Spec.SecretRef.Name)
	return s
}
