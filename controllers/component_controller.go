package controllers

import (
	"context"
	"errors"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/catalog"
)

// ComponentReconciler reconciles a kind whose only job is to be valid: pipelines, profiles,
// routers, steps and observability kinds. It checks the managed signature and the Go-side rules,
// and reports SignatureValid (for managed objects), Ready and observedGeneration.
type ComponentReconciler struct {
	client.Client
	Kind              catalog.Kind
	New               func() nexov1alpha1.Object
	Keys              *TrustedKeys
	RequireSignatures bool
	// KeysChanged receives an event per managed object of this kind when the trusted keys change.
	KeysChanged chan event.GenericEvent
}

// SetupWithManager registers the controller.
func (r *ComponentReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named(r.Kind.Plural).
		For(r.New(), builder.WithPredicates(specOrSignatureChanged())).
		WatchesRawSource(source.Channel(r.KeysChanged, &handler.EnqueueRequestForObject{})).
		Complete(r)
}

// Reconcile validates one object and writes its status when it changed.
func (r *ComponentReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	obj := r.New()
	if err := r.Get(ctx, req.NamespacedName, obj); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !obj.GetDeletionTimestamp().IsZero() {
		return ctrl.Result{}, nil
	}
	before := obj.DeepCopyObject().(nexov1alpha1.Object)
	r.evaluate(obj)
	obj.NexoStatus().ObservedGeneration = obj.GetGeneration()
	if err := writeStatus(ctx, r.Client, before, obj); err != nil {
		return statusConflict(ctx, err)
	}
	return ctrl.Result{}, nil
}

func (r *ComponentReconciler) evaluate(obj nexov1alpha1.Object) {
	if bad := checkSignature(obj, r.Keys, r.RequireSignatures); bad != nil {
		setCondition(obj, nexov1alpha1.ConditionReady, metav1.ConditionFalse, bad.reason, bad.message)
		return
	}
	if bad := invalidOf(nexov1alpha1.Validate(obj)); bad != nil {
		setCondition(obj, nexov1alpha1.ConditionReady, metav1.ConditionFalse, bad.reason, bad.message)
		return
	}
	setCondition(obj, nexov1alpha1.ConditionReady, metav1.ConditionTrue, nexov1alpha1.ReasonValid, r.Kind.Kind+" is valid")
}

var errReplayed = errors.New("signature revision older than the accepted one")
