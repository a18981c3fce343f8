package controllers

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
)

// keysReconciler re-reads the trusted-keys Secret when it changes, and the environment id from
// the installation ConfigMap (every audiencePoll, when no --environment-id is set), and re-queues
// every object of the reconciled kinds when either changed: a managed object's verdict may change
// with the keys or the audience, and so may an object that carries a signature without the
// managed-by label, or any object under --require-signatures.
type keysReconciler struct {
	client.Client
	APIReader client.Reader
	Keys      *TrustedKeys
	events    map[string]chan event.GenericEvent
}

// audiencePoll is how often the installation ConfigMap is read while it supplies the
// environment id. The operator may only get it by name (docs/rbac.md), so it is read, not watched.
const audiencePoll = 10 * time.Second

func (r *keysReconciler) SetupWithManager(mgr ctrl.Manager) error {
	isKeys := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetNamespace() == r.Keys.Secret.Namespace && o.GetName() == r.Keys.Secret.Name
	})
	// One request at start, so the ConfigMap is read even while the Secret does not exist.
	start := make(chan event.GenericEvent, 1)
	start <- event.GenericEvent{Object: &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: r.Keys.Secret.Namespace, Name: r.Keys.Secret.Name}}}
	return ctrl.NewControllerManagedBy(mgr).Named("trusted-keys").
		WatchesMetadata(&corev1.Secret{}, &handler.EnqueueRequestForObject{}, builder.WithPredicates(isKeys)).
		WatchesRawSource(source.Channel(start, &handler.EnqueueRequestForObject{})).
		Complete(r)
}

func (r *keysReconciler) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	var next ctrl.Result
	if r.Keys.followsConfigMap() {
		next.RequeueAfter = audiencePoll
	}
	keysChanged, err := r.Keys.Load(ctx, r.APIReader)
	if err != nil {
		return ctrl.Result{}, err
	}
	audienceChanged, err := r.Keys.LoadAudience(ctx, r.APIReader)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !keysChanged && !audienceChanged {
		return next, nil
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
	return next, nil
}
