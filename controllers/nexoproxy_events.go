package controllers

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
)

// recordTransitions emits Events for what changed between the status a reconcile started from
// and the one it wrote: the Ready condition's reason (phase changes, blocked reasons, conflicts,
// a stalled rollout), a new revision applied, a rollout completed. Events are derived from
// transitions only, so a requeue that changes nothing emits nothing.
func (r *ProxyReconciler) recordTransitions(before, after *nexov1alpha1.NexoProxy) {
	if r.Recorder == nil {
		return
	}
	started := after.Status.GraphRevision != before.Status.GraphRevision
	completed := after.Status.AvailableRevision != before.Status.AvailableRevision && after.Status.AvailableRevision != ""
	// A proxy's first revision is its creation, told once by RolloutComplete; a later one is a
	// rollout of a change, told when it starts too.
	if started && before.Status.GraphRevision != "" {
		r.Recorder.Eventf(after, nil, corev1.EventTypeNormal, nexov1alpha1.EventRolloutStarted, "Rollout",
			"rolling out graph revision "+after.Status.GraphRevision+" (from "+before.Status.GraphRevision+")")
	}
	if completed {
		r.Recorder.Eventf(after, nil, corev1.EventTypeNormal, nexov1alpha1.EventRolloutComplete, "Rollout",
			"every replica runs graph revision "+after.Status.AvailableRevision)
	}
	was := meta.FindStatusCondition(before.Status.Conditions, nexov1alpha1.ConditionReady)
	now := meta.FindStatusCondition(after.Status.Conditions, nexov1alpha1.ConditionReady)
	if now == nil || was != nil && was.Reason == now.Reason && was.Status == now.Status {
		return
	}
	// The rollout Events already say it: Progressing at a rollout's start, Available at its end.
	if started && now.Reason == nexov1alpha1.ReasonProgressing || completed && now.Reason == nexov1alpha1.ReasonAvailable {
		return
	}
	kind := corev1.EventTypeWarning
	if now.Status == "True" || now.Reason == nexov1alpha1.ReasonProgressing {
		kind = corev1.EventTypeNormal
	}
	r.Recorder.Eventf(after, nil, kind, now.Reason, "Reconcile", "%s: %s", after.Status.Phase, now.Message)
}
