package controllers

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
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
