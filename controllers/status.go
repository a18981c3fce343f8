package controllers

import (
	"bytes"
	"context"

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
// makes no API call at all when there is none.
func writeStatus(ctx context.Context, c client.Client, before, after nexov1alpha1.Object) error {
	patch := client.MergeFrom(before)
	data, err := patch.Data(after)
	if err != nil {
		return err
	}
	if bytes.Equal(data, []byte("{}")) {
		return nil
	}
	return c.Status().Patch(ctx, after, patch)
}

func conditionTrue(obj nexov1alpha1.Object, condType string) bool {
	return meta.IsStatusConditionTrue(obj.NexoStatus().Conditions, condType)
}

// readyAndCurrent reports whether obj is Ready for its current generation.
func readyAndCurrent(obj nexov1alpha1.Object) (bool, *metav1.Condition) {
	c := meta.FindStatusCondition(obj.NexoStatus().Conditions, nexov1alpha1.ConditionReady)
	if c == nil {
		return false, nil
	}
	return c.Status == metav1.ConditionTrue && c.ObservedGeneration == obj.GetGeneration(), c
}
