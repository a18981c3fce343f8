package controllers

import (
	"slices"
	"testing"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nexo-io/nexo-edge/contract/scheme"
	"github.com/nexo-io/nexo-edge/controllers/render"
	"github.com/nexo-io/nexo-edge/controllers/slimcache"
)

// A child kind added to render.Children gets a store to read its cache from, is watched on a
// metadata-only informer, and is remembered by its resourceVersion.
func TestStoresAndWatchesFollowTheChildTable(t *testing.T) {
	pdb := render.ChildKind{GVK: policyv1.SchemeGroupVersion.WithKind("PodDisruptionBudget"), Cache: render.CacheMetadata,
		New: func() client.Object { return &policyv1.PodDisruptionBudget{} }}
	stores := newChildStores(&slimcache.Registry{Scheme: scheme.New()}, append(slices.Clone(render.Children), pdb))
	if _, ok := stores.meta["PodDisruptionBudget"]; !ok {
		t.Error("no store for the new child kind")
	}
	for _, k := range render.Children {
		_, meta := stores.meta[k.Kind()]
		_, dep := stores.deployments[k.Kind()]
		if meta == dep {
			t.Errorf("%s: a metadata store %v, a Deployment state store %v", k.Kind(), meta, dep)
		}
	}
	if o, ok := CacheObject(pdb).(*metav1.PartialObjectMetadata); !ok || o.GroupVersionKind() != pdb.GVK {
		t.Errorf("the new kind is watched as %T", CacheObject(pdb))
	}
	if CacheObject(render.DeploymentChild).GetObjectKind().GroupVersionKind().Kind != "" {
		// A typed object carries no GVK; the informer is asked for the Deployment type itself.
		t.Error("the Deployment is not watched as its own type")
	}
	o := &policyv1.PodDisruptionBudget{}
	o.ResourceVersion = "7"
	if versionOf(pdb, o) != "7" {
		t.Error("a metadata child is not remembered by its resourceVersion")
	}
}
