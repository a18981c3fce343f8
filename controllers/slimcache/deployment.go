package slimcache

import (
	"hash/fnv"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DeploymentState is what the operator keeps of a proxy's Deployment: its identity and
// controller reference, a hash of its labels (a label edit does not move the generation), the
// desired replicas and the replica counts WorkloadAvailable reads. The Deployment informer stores
// these instead of Deployments (TrimDeployment): even an emptied appsv1.Deployment is about
// 1.8 KB, because the pod template is part of the struct; a DeploymentState is 168 bytes.
type DeploymentState struct {
	ChildMeta
	LabelsHash uint64
	// Replicas is spec.replicas (1 when unset, as the API server defaults it).
	Replicas int32
	Status   ReplicaCounts
}

// ReplicaCounts are the Deployment status fields a proxy's availability is computed from.
type ReplicaCounts struct {
	ObservedGeneration                                  int64
	Replicas, UpdatedReplicas, ReadyReplicas, Available int32
	// Stalled: the Progressing condition is False with ProgressDeadlineExceeded.
	Stalled bool
}

// GetObjectKind: a DeploymentState carries no type information (it is never serialized).
func (d *DeploymentState) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject copies the state (it holds no references).
func (d *DeploymentState) DeepCopyObject() runtime.Object {
	out := *d
	return &out
}

// StateOf summarises a Deployment (the cache's trimmed state passes through).
func StateOf(o client.Object) *DeploymentState {
	switch d := o.(type) {
	case *DeploymentState:
		return d
	case *appsv1.Deployment:
		want := int32(1)
		if d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
		s := d.Status
		return &DeploymentState{
			ChildMeta:  MetaOf(d),
			LabelsHash: labelsHash(d.Labels),
			Replicas:   want,
			Status: ReplicaCounts{ObservedGeneration: s.ObservedGeneration, Replicas: s.Replicas,
				UpdatedReplicas: s.UpdatedReplicas, ReadyReplicas: s.ReadyReplicas, Available: s.AvailableReplicas, Stalled: stalled(s)},
		}
	}
	return nil
}

// stalled reports a rollout the Deployment controller gave up on (ProgressDeadlineExceeded).
func stalled(s appsv1.DeploymentStatus) bool {
	for _, c := range s.Conditions {
		if c.Type == appsv1.DeploymentProgressing {
			return c.Status == corev1.ConditionFalse && c.Reason == "ProgressDeadlineExceeded"
		}
	}
	return false
}

// TrimDeployment is the cache transform for the proxies' Deployments: it stores their
// DeploymentState. Anything else (a tombstone) passes through.
func TrimDeployment(obj any) (any, error) {
	if d, ok := obj.(*appsv1.Deployment); ok {
		return StateOf(d), nil
	}
	return obj, nil
}

// labelsHash is an order-independent hash of a label set.
func labelsHash(labels map[string]string) uint64 {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	h := fnv.New64a()
	for _, k := range keys {
		_, _ = h.Write([]byte(k))
		_, _ = h.Write([]byte{0})
		_, _ = h.Write([]byte(labels[k]))
		_, _ = h.Write([]byte{0})
	}
	return h.Sum64()
}
