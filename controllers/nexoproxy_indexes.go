package controllers

import (
	"context"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/catalog"
	"github.com/nexo-io/nexo-edge/controllers/slimcache"
)

// Field indexes on every reference, so a change re-queues exactly the proxies that use it.
const (
	indexProxyPipeline = "spec.pipelineRef.name"
	indexProxyProfile  = "spec.profileRef.name"
	indexProxyLicense  = "spec.licenseRef.name"
	indexProxyObserve  = "spec.observabilityRefs"
	indexPipelineRefs  = "spec.refs"
)

func refKey(kind, name string) string { return kind + "/" + name }

func indexProxy(field string) client.IndexerFunc {
	return func(o client.Object) []string {
		p := o.(*nexov1alpha1.NexoProxy)
		switch field {
		case indexProxyPipeline:
			return []string{p.Spec.PipelineRef.Name}
		case indexProxyProfile:
			return []string{p.Spec.ProfileRef.Name}
		case indexProxyLicense:
			return []string{p.Spec.LicenseRef.Name}
		}
		out := make([]string, len(p.Spec.ObservabilityRefs))
		for i, r := range p.Spec.ObservabilityRefs {
			out[i] = refKey(r.Kind, r.Name)
		}
		return out
	}
}

func indexPipeline(o client.Object) []string {
	refs := o.(*nexov1alpha1.NexoPipeline).Refs()
	out := make([]string, len(refs))
	for i, r := range refs {
		out[i] = refKey(r.Kind, r.Name)
	}
	return out
}

// proxiesWhere lists the proxies in ns whose index field has value (names only, so the cached
// proxies are read without copies).
func (r *ProxyReconciler) proxiesWhere(ctx context.Context, ns, field, value string) []reconcile.Request {
	var list nexov1alpha1.NexoProxyList
	if err := r.List(ctx, &list, client.InNamespace(ns), client.MatchingFields{field: value}, client.UnsafeDisableDeepCopy); err != nil {
		return nil
	}
	out := make([]reconcile.Request, len(list.Items))
	for i, p := range list.Items {
		out[i] = reconcile.Request{NamespacedName: types.NamespacedName{Namespace: p.Namespace, Name: p.Name}}
	}
	return out
}

// proxiesForComponent maps a changed pipeline step, router or observability object to proxies.
func (r *ProxyReconciler) proxiesForComponent(kind string) func(context.Context, client.Object) []reconcile.Request {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		switch kind {
		case "NexoPipeline":
			return r.proxiesWhere(ctx, o.GetNamespace(), indexProxyPipeline, o.GetName())
		case "NexoDeploymentProfile":
			return r.proxiesWhere(ctx, o.GetNamespace(), indexProxyProfile, o.GetName())
		case "NexoLicense":
			return r.proxiesWhere(ctx, o.GetNamespace(), indexProxyLicense, o.GetName())
		}
		if k, ok := catalog.Lookup(kind); ok && k.AllowedIn(catalog.SlotObservability) {
			return r.proxiesWhere(ctx, o.GetNamespace(), indexProxyObserve, refKey(kind, o.GetName()))
		}
		var pipelines nexov1alpha1.NexoPipelineList
		if err := r.List(ctx, &pipelines, client.InNamespace(o.GetNamespace()), client.MatchingFields{indexPipelineRefs: refKey(kind, o.GetName())}); err != nil {
			return nil
		}
		var out []reconcile.Request
		for _, p := range pipelines.Items {
			out = append(out, r.proxiesWhere(ctx, p.Namespace, indexProxyPipeline, p.Name)...)
		}
		return out
	}
}

// proxiesSharingLicense re-queues, when a proxy is deleted, the proxies blocked by maxProxies
// that share its license document, in any namespace (every NexoLicense holding the document):
// a slot may have freed. A new proxy never displaces an older one (proxies count in creation
// order), so creations need no re-queue.
func (r *ProxyReconciler) proxiesSharingLicense(ctx context.Context, o client.Object) []reconcile.Request {
	p := o.(*nexov1alpha1.NexoProxy)
	own := types.NamespacedName{Namespace: p.Namespace, Name: p.Spec.LicenseRef.Name}
	doc := ""
	lic := &nexov1alpha1.NexoLicense{}
	if err := r.Get(ctx, own, lic); err == nil {
		doc = lic.Status.DocumentID
	}
	licenses, err := holders(ctx, r.Client, doc, own)
	if err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, l := range licenses {
		var list nexov1alpha1.NexoProxyList
		// Read-only: the cached proxies are not copied.
		if err := r.List(ctx, &list, client.InNamespace(l.Namespace), client.MatchingFields{indexProxyLicense: l.Name}, client.UnsafeDisableDeepCopy); err != nil {
			return nil
		}
		for _, q := range list.Items {
			if c := meta.FindStatusCondition(q.Status.Conditions, nexov1alpha1.ConditionReady); c != nil && c.Reason == nexov1alpha1.ReasonLicenseExhausted {
				out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: q.Namespace, Name: q.Name}})
			}
		}
	}
	return out
}

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

// secretUsers remembers which Secrets each proxy's last resolution read, so a Secret change
// re-queues exactly those proxies. Secret references are spread over many kinds (TLS, CAs,
// credentials, salts, pull secrets), so this is kept from resolution rather than indexed.
// It also holds the content of those Secrets, keyed by resourceVersion, and drops a Secret's
// content once no proxy references it.
//
// Only the proxy-to-Secrets lists are kept (a few names per proxy); the Secrets-to-proxies
// direction is a scan of them on a Secret event, which is rare next to the memory a reverse map
// would keep for every proxy.
type secretUsers struct {
	mu       sync.Mutex
	byProxy  map[types.NamespacedName][]types.NamespacedName
	contents map[types.NamespacedName]*corev1.Secret
}

// content returns the cached Secret if it is at resourceVersion rv.
func (s *secretUsers) content(key types.NamespacedName, rv string) *corev1.Secret {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.contents[key]; c != nil && c.ResourceVersion == rv {
		return c
	}
	return nil
}

func (s *secretUsers) store(key types.NamespacedName, secret *corev1.Secret) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.contents == nil {
		s.contents = map[types.NamespacedName]*corev1.Secret{}
	}
	s.contents[key] = secret
}

// set records the Secrets the proxy's resolution read (nil: the proxy is gone).
func (s *secretUsers) set(proxy types.NamespacedName, secrets []types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byProxy == nil {
		s.byProxy = map[types.NamespacedName][]types.NamespacedName{}
	}
	old := s.byProxy[proxy]
	if slices.Equal(old, secrets) {
		return
	}
	if len(secrets) == 0 {
		delete(s.byProxy, proxy)
	} else {
		s.byProxy[proxy] = slices.Clone(secrets) // exactly its length: resolution appends
	}
	for _, sec := range old {
		if !slices.Contains(secrets, sec) && !s.usedLocked(sec) { // nobody reads it any more
			delete(s.contents, sec)
		}
	}
}

func (s *secretUsers) usedLocked(secret types.NamespacedName) bool {
	for _, secrets := range s.byProxy {
		if slices.Contains(secrets, secret) {
			return true
		}
	}
	return false
}

func (s *secretUsers) proxiesFor(_ context.Context, secret client.Object) []reconcile.Request {
	key := types.NamespacedName{Namespace: secret.GetNamespace(), Name: secret.GetName()}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []reconcile.Request
	for p, secrets := range s.byProxy {
		if slices.Contains(secrets, key) {
			out = append(out, reconcile.Request{NamespacedName: p})
		}
	}
	return out
}
