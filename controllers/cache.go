package controllers

import (
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nexo-io/nexo-edge/render"
)

// What the operator keeps of the objects it does not reconcile but reads: its generated children
// and the Secrets a proxy references. Those caches hold one entry per child of every proxy, so
// they hold only the fields the NexoProxy controller reads; everything else is read from the API
// server, in full, when a child has to be compared (see apply).
//
//   - every such object: name, namespace, resourceVersion, generation, deletion timestamp, the
//     controller owner reference (for Owns and IsControlledBy) and the content-hash annotation;
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
	if keepLabels {
		out.Labels = m.Labels
	}
	if ref := metav1.GetControllerOfNoCopy(m); ref != nil {
		out.OwnerReferences = []metav1.OwnerReference{*ref}
	}
	if h, ok := m.Annotations[render.ContentHashKey]; ok {
		out.Annotations = map[string]string{render.ContentHashKey: h}
	}
	return out
}
