package controllers

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
)

// keysReconciler re-reads the trusted-keys Secret when it changes and re-queues every object of
// the reconciled kinds: a managed object's verdict may change with the keys, and so may an
// object that carries a signature without the managed-by label, or any object under
// --require-signatures.
type keysReconciler struct {
	client.Client
	APIReader client.Reader
	Keys      *TrustedKeys
	events    map[string]chan event.GenericEvent
}

func (r *keysReconciler) SetupWithManager(mgr ctrl.Manager) error {
	isKeys := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetNamespace() == r.Keys.Secret.Namespace && o.GetName() == r.Keys.Secret.Name
	})
	return ctrl.NewControllerManagedBy(mgr).Named("trusted-keys").
		WatchesMetadata(&corev1.Secret{}, &handler.EnqueueRequestForObject{}, builder.WithPredicates(isKeys)).
		Complete(r)
}

func (r *keysReconciler) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	changed, err := r.Keys.Load(ctx, r.APIReader)
	if err != nil || !changed {
		return ctrl.Result{}, err
	}
	for kind, ch := range r.events {
		o, err := r.Scheme().New(nexov1alpha1.GroupVersion.WithKind(kind + "List"))
		if err != nil {
			return ctrl.Result{}, err
		}
		list := o.(client.ObjectList)
		if err := r.List(ctx, list); err != nil {
			return ctrl.Result{}, err
		}
		items, err := apimeta.ExtractList(list)
		if err != nil {
			return ctrl.Result{}, err
		}
		for _, it := range items {
			ch <- event.GenericEvent{Object: it.(client.Object)}
		}
	}
	return ctrl.Result{}, nil
}
