package controllers

import (
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/render"
)

// What the operator keeps of the objects it does not reconcile but reads: its generated children
// and the Secrets a proxy references. Those caches hold one entry per child of every proxy, so
// they hold only the fields the NexoProxy controller reads; everything else is read from the API
// server, in full, when a child has to be compared (see apply).
//
//   - every such object: name, namespace, resourceVersion, generation, deletion timestamp and
//     the controller owner reference (for Owns and IsControlledBy);
//   - Deployments also keep their labels (an edit of the labels does not move the generation),
//     spec.replicas and the replica counts of their status (for WorkloadAvailable).
//
// The transforms are idempotent: client-go may apply them to an object it has already trimmed.

// TrimMetadata is the cache transform for the metadata-only informers (ConfigMaps, Services and
// Secrets).
func TrimMetadata(obj any) (any, error) {
	if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
		m.ObjectMeta = trimObjectMeta(&m.ObjectMeta, false)
	}
	return obj, nil
}

// TrimDeployment is the cache transform for the proxies' Deployments: no pod template, no
// strategy, no conditions.
func TrimDeployment(obj any) (any, error) {
	d, ok := obj.(*appsv1.Deployment)
	if !ok {
		return obj, nil
	}
	d.ObjectMeta = trimObjectMeta(&d.ObjectMeta, true)
	d.Spec = appsv1.DeploymentSpec{Replicas: d.Spec.Replicas}
	s := d.Status
	d.Status = appsv1.DeploymentStatus{
		ObservedGeneration: s.ObservedGeneration, Replicas: s.Replicas, UpdatedReplicas: s.UpdatedReplicas,
		ReadyReplicas: s.ReadyReplicas, AvailableReplicas: s.AvailableReplicas,
	}
	return d, nil
}

func trimObjectMeta(m *metav1.ObjectMeta, keepLabels bool) metav1.ObjectMeta {
	out := metav1.ObjectMeta{
		Name: m.Name, Namespace: m.Namespace, ResourceVersion: m.ResourceVersion, Generation: m.Generation,
		DeletionTimestamp: m.DeletionTimestamp,
	}
	if keepLabels && len(m.Labels) > 0 {
		out.Labels = make(map[string]string, len(m.Labels))
		for k, v := range m.Labels {
			out.Labels[shared(k)] = shared(v)
		}
	}
	if ref := metav1.GetControllerOfNoCopy(m); ref != nil {
		r := *ref
		r.APIVersion, r.Kind = shared(r.APIVersion), shared(r.Kind)
		out.OwnerReferences = []metav1.OwnerReference{r}
	}
	return out
}

// sharedStrings are the strings every cached child repeats (owner kind, label keys and values):
// decoding allocates them afresh for every object, the cache keeps one copy.
var sharedStrings = map[string]string{}

func init() {
	for _, s := range []string{nexov1alpha1.GroupVersion.String(), "NexoProxy", render.ManagedByValue} {
		sharedStrings[s] = s
	}
	for k, v := range render.Labels("") {
		sharedStrings[k] = k
		if v != "" {
			sharedStrings[v] = v
		}
	}
}

// shared returns the cache's copy of s when s is one of sharedStrings, s otherwise.
func shared(s string) string {
	if c, ok := sharedStrings[s]; ok {
		return c
	}
	return s
}
