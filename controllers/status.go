package controllers

import (
	"bytes"
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
)

// setCondition records a condition for the object's current generation. meta.SetStatusCondition
// only moves lastTransitionTime when the status really changes.
func setCondition(obj nexov1alpha1.Object, condType string, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(&obj.NexoStatus().Conditions, metav1.Condition{
		Type: condType, Status: status, Reason: reason, Message: message, ObservedGeneration: obj.GetGeneration(),
	})
}

// writeStatus patches the status subresource with the difference between before and after, and
// makes no API call at all when there is none. The patch carries before's resourceVersion: a
// merge patch holds only the fields that differ from before, so written over a status this pass
// did not read (a cache that has not seen the last write yet, for example right after a
// restart) it would keep the fields it left out, stale (the crash-injection suite found proxies
// Ready with two ready replicas of one). With the version, such a write fails with a Conflict
// and the pass is retried on a fresh read (statusConflict).
func writeStatus(ctx context.Context, c client.Client, before, after nexov1alpha1.Object) error {
	data, err := client.MergeFrom(before).Data(after)
	if err != nil {
		return err
	}
	if bytes.Equal(data, []byte("{}")) {
		return nil
	}
	return c.Status().Patch(ctx, after, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
}

// conflictRetry is how soon a pass whose status write met a Conflict runs again: the cache has
// then seen the newer object (its own watch delivers it within milliseconds).
const conflictRetry = 500 * time.Millisecond

// statusConflict turns a Conflict from writeStatus into a quiet retry (it is not an error: the
// pass read a status older than the stored one); other errors pass through, NotFound ignored.
func statusConflict(ctx context.Context, err error) (ctrl.Result, error) {
	if apierrors.IsConflict(err) {
		logf.FromContext(ctx).V(1).Info("status changed since it was read; retrying on a fresh read")
		return ctrl.Result{RequeueAfter: conflictRetry}, nil
	}
	return ctrl.Result{}, client.IgnoreNotFound(err)
}
