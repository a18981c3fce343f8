// What re-queues a NexoProxy: a changed component, profile, license or observability object
// (through the indexes of nexoproxy_indexes.go), or a deleted proxy that held a license slot.

package controllers

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/catalog"
)

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
