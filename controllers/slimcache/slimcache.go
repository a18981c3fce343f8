// Package slimcache is the operator's memory layer: what its informers keep of the objects it
// reads (ChildMeta, DeploymentState, a trimmed NexoProxy), the cache transforms that produce
// them, and Store, which reads those entries straight from the informers' own stores.
package slimcache

import (
	"unique"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
)

// What the operator keeps of the objects it reads. The caches hold one entry per proxy and per
// child of every proxy, so they hold only the fields the NexoProxy controller reads; everything
// else is read from the API server, in full, when a child has to be compared (see apply).
//
//   - children and Secrets: a ChildMeta (meta.go): name, namespace, resourceVersion,
//     generation, deletion and the controller owner reference (for Owns and IsControlledBy);
//   - Deployments: a DeploymentState (deployment.go): a ChildMeta and the replica counts;
//   - NexoProxies: everything but managedFields, with the strings proxies repeat kept once: the
//     type and namespace, the names of the objects they reference (a fleet shares its pipeline,
//     profile and license), and the condition types, statuses, reasons and messages and the phase.
//
// The transforms are idempotent: client-go may apply them to an object it has already trimmed.

// TrimMetadata is the cache transform for the metadata-only informers (ConfigMaps, Services and
// Secrets): they store a ChildMeta.
func TrimMetadata(obj any) (any, error) {
	if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
		c := MetaOf(m)
		return &c, nil
	}
	return obj, nil
}

// TrimProxy is the cache transform for NexoProxies.
func TrimProxy(obj any) (any, error) {
	p, ok := obj.(*nexov1alpha1.NexoProxy)
	if !ok {
		return obj, nil
	}
	p.ManagedFields = nil
	p.APIVersion, p.Kind, p.Namespace = Intern(p.APIVersion), Intern(p.Kind), Intern(p.Namespace)
	spec := &p.Spec
	spec.PipelineRef.Name, spec.ProfileRef.Name, spec.LicenseRef.Name = Intern(spec.PipelineRef.Name), Intern(spec.ProfileRef.Name), Intern(spec.LicenseRef.Name)
	for i := range spec.ObservabilityRefs {
		r := &spec.ObservabilityRefs[i]
		r.Kind, r.Name = Intern(r.Kind), Intern(r.Name)
	}
	p.Status.Phase = nexov1alpha1.ProxyPhase(Intern(string(p.Status.Phase)))
	if n := len(p.Status.Conditions); n > 0 {
		// Decoding grows the slice by doubling; the copy has exactly its length.
		conds := make([]metav1.Condition, n)
		copy(conds, p.Status.Conditions)
		for i := range conds {
			c := &conds[i]
			c.Type, c.Reason, c.Message = Intern(c.Type), Intern(c.Reason), Intern(c.Message)
			c.Status = metav1.ConditionStatus(Intern(string(c.Status)))
		}
		p.Status.Conditions = conds
	}
	return p, nil
}

// Intern returns the one copy of s that every cached object shares: decoding allocates each
// string afresh for every object, and these repeat across all of them.
func Intern(s string) string { return unique.Make(s).Value() }
