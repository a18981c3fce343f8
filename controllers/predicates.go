// Predicates: which events of the watched objects re-queue anything.

package controllers

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/controllers/slimcache"
)

// childChanged ignores the creation of a child (the operator just made it). Children are cached
// as metadata (see controllers/slimcache), so for them any new resourceVersion may be drift and passes. For
// the Deployment, whose status moves all the time, a new generation, new labels or owners pass
// (status changes are deploymentChanged's).
func childChanged() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc: func(event.CreateEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			a, b := e.ObjectOld, e.ObjectNew
			da, ok1 := a.(*slimcache.DeploymentState)
			db, ok2 := b.(*slimcache.DeploymentState)
			if !ok1 || !ok2 {
				return a.GetResourceVersion() != b.GetResourceVersion()
			}
			return da.Generation != db.Generation || da.LabelsHash != db.LabelsHash || da.Owner != db.Owner
		},
	}
}

// deploymentChanged is childChanged for the Deployment, plus the status updates that change what
// the proxy reports about it (the same summary reportWorkload writes).
func deploymentChanged() predicate.Predicate {
	child := childChanged()
	return predicate.Funcs{
		CreateFunc: func(event.CreateEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			if child.Update(e) {
				return true
			}
			return workloadOf(slimcache.StateOf(e.ObjectOld)) != workloadOf(slimcache.StateOf(e.ObjectNew))
		},
	}
}

// readinessChanged passes events that can change what a proxy resolves: create, delete, a spec,
// label or annotation change, or a change of the Ready condition (not other status churn).
func readinessChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		if e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() {
			return true
		}
		oldObj, ok1 := e.ObjectOld.(nexov1alpha1.Object)
		newObj, ok2 := e.ObjectNew.(nexov1alpha1.Object)
		if !ok1 || !ok2 {
			return true
		}
		a := meta.FindStatusCondition(oldObj.NexoStatus().Conditions, nexov1alpha1.ConditionReady)
		b := meta.FindStatusCondition(newObj.NexoStatus().Conditions, nexov1alpha1.ConditionReady)
		if (a == nil) != (b == nil) {
			return true
		}
		return a != nil && (a.Status != b.Status || a.Reason != b.Reason || a.Message != b.Message || a.ObservedGeneration != b.ObservedGeneration)
	}}
}

// specOrSignatureChanged passes creates, deletes, spec changes and annotation changes (a
// re-signed object keeps its generation) but not status-only updates.
func specOrSignatureChanged() predicate.Predicate {
	return predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}, predicate.LabelChangedPredicate{})
}
