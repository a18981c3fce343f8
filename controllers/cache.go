package controllers

import (
	"unique"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
)

// What the operator keeps of the objects it reads. The caches hold one entry per proxy and per
// child of every proxy, so they hold only the fields the NexoProxy controller reads; everything
// else is read from the API server, in full, when a child has to be compared (see apply).
//
//   - children and Secrets: name, namespace, resourceVersion, generation, deletion timestamp and
//     the controller owner reference (for Owns and IsControlledBy);
//   - Deployments: a DeploymentState (workloads.go) instead of the object;
//   - NexoProxies: everything but managedFields, with the strings every proxy repeats (condition
//     types, statuses, reasons and messages, the phase) kept once.
//
// The transforms are idempotent: client-go may apply them to an object it has already trimmed.

// TrimMetadata is the cache transform for the metadata-only informers (ConfigMaps, Services and
// Secrets).
func TrimMetadata(obj any) (any, error) {
	if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
		m.ObjectMeta = trimObjectMeta(&m.ObjectMeta)
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
	p.Status.Phase = nexov1alpha1.ProxyPhase(intern(string(p.Status.Phase)))
	if n := len(p.Status.Conditions); n > 0 {
		// Decoding grows the slice by doubling; the copy has exactly its length.
		conds := make([]metav1.Condition, n)
		copy(conds, p.Status.Conditions)
		for i := range conds {
			c := &conds[i]
			c.Type, c.Reason, c.Message = intern(c.Type), intern(c.Reason), intern(c.Message)
			c.Status = metav1.ConditionStatus(intern(string(c.Status)))
		}
		p.Status.Conditions = conds
	}
	return p, nil
}

func trimObjectMeta(m *metav1.ObjectMeta) metav1.ObjectMeta {
	out := metav1.ObjectMeta{
		Name: m.Name, Namespace: intern(m.Namespace), ResourceVersion: m.ResourceVersion, Generation: m.Generation,
		DeletionTimestamp: m.DeletionTimestamp,
	}
	if ref := metav1.GetControllerOfNoCopy(m); ref != nil {
		r := *ref
		r.APIVersion, r.Kind = intern(r.APIVersion), intern(r.Kind)
		r.Controller, r.BlockOwnerDeletion = sharedBool(r.Controller), sharedBool(r.BlockOwnerDeletion)
		out.OwnerReferences = []metav1.OwnerReference{r}
	}
	return out
}

// intern returns the one copy of s that every cached object shares: decoding allocates each
// string afresh for every object, and these repeat across all of them.
func intern(s string) string { return unique.Make(s).Value() }

var sharedTrue, sharedFalse = true, false

// sharedBool points at one of two shared booleans instead of a decoded allocation each. Cached
// objects are never written through (readers get deep copies).
func sharedBool(b *bool) *bool {
	switch {
	case b == nil:
		return nil
	case *b:
		return &sharedTrue
	default:
		return &sharedFalse
	}
}
