package controllers

import (
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/nexo-io/nexo-edge/controllers/render"
	"github.com/nexo-io/nexo-edge/controllers/slimcache"
)

// What the operator's caches, watches and stores do with each child kind of render.Children,
// by the kind's cache shape.

// CacheObject is the object a child kind's informer is asked for: a PartialObjectMetadata of the
// kind for a metadata-only informer, the kind's own type otherwise.
func CacheObject(k render.ChildKind) client.Object {
	if k.Cache == render.CacheMetadata {
		return slimcache.MetadataOf(k.GVK)
	}
	return k.New()
}

// ChildCaches is the cache configuration of the child kinds: the operator's own objects only
// (the ours selector), trimmed to the kind's cache shape; a kind that caches all its objects
// (AllObjects) is cached in namespaces, all of them when namespaces is nil.
func ChildCaches(kinds []render.ChildKind, ours labels.Selector, namespaces map[string]cache.Config) map[client.Object]cache.ByObject {
	out := map[client.Object]cache.ByObject{}
	for _, k := range kinds {
		by := cache.ByObject{Label: ours, Transform: slimcache.TrimMetadata}
		if k.Cache == render.CacheDeploymentState {
			by.Transform = slimcache.TrimDeployment
		}
		if k.AllObjects {
			by.Label, by.Namespaces = nil, namespaces
		}
		out[CacheObject(k)] = by
	}
	return out
}

// childStores reads each child kind's entries from its informers' stores.
type childStores struct {
	meta        map[string]slimcache.Store[*slimcache.ChildMeta]
	deployments map[string]slimcache.Store[*slimcache.DeploymentState]
}

func newChildStores(reg *slimcache.Registry, kinds []render.ChildKind) childStores {
	s := childStores{meta: map[string]slimcache.Store[*slimcache.ChildMeta]{}, deployments: map[string]slimcache.Store[*slimcache.DeploymentState]{}}
	for _, k := range kinds {
		switch {
		case k.Cache == render.CacheDeploymentState:
			s.deployments[k.Kind()] = slimcache.For[*slimcache.DeploymentState](reg, k.GVK, false)
		case k.ListOwned:
			s.meta[k.Kind()] = slimcache.ForOwned[*slimcache.ChildMeta](reg, k.GVK, true)
		default:
			s.meta[k.Kind()] = slimcache.For[*slimcache.ChildMeta](reg, k.GVK, true)
		}
	}
	return s
}

// get returns the cached entry of a child.
func (s childStores) get(k render.ChildKind, key types.NamespacedName) (client.Object, bool) {
	if k.Cache == render.CacheDeploymentState {
		v, ok := s.deployments[k.Kind()].Get(key)
		return v, ok
	}
	v, ok := s.meta[k.Kind()].Get(key)
	return v, ok
}

// versionOf is the version a child is remembered at: a Deployment's generation and labels
// (deploymentVersion), any other child's resourceVersion.
func versionOf(k render.ChildKind, o client.Object) string {
	if k.Cache == render.CacheDeploymentState {
		return deploymentVersion(o)
	}
	return o.GetResourceVersion()
}

// childPredicate is what changes of a child kind's cached entries re-queue the proxy.
func childPredicate(k render.ChildKind) predicate.Predicate {
	if k.Cache == render.CacheDeploymentState {
		return deploymentChanged()
	}
	return childChanged()
}
