// Package children proves that a child kind declared once, in controllers/render.Children, is
// seen by the operator's cache configuration. It adds a kind the operator does not have (a
// PodDisruptionBudget) to a copy of the table and looks for it. The other consumers have the
// same test beside them (docs/development.md, "Adding a child kind").
package children

import (
	"slices"
	"testing"

	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nexo-io/nexo-edge/controllers"
	"github.com/nexo-io/nexo-edge/controllers/render"
)

var pdb = render.ChildKind{
	GVK:      policyv1.SchemeGroupVersion.WithKind("PodDisruptionBudget"),
	Resource: "poddisruptionbudgets",
	Verbs:    []string{"get", "list", "watch", "create", "update", "patch", "delete"},
	Cache:    render.CacheMetadata,
	New:      func() client.Object { return &policyv1.PodDisruptionBudget{} },
}

func withPDB() []render.ChildKind { return append(slices.Clone(render.Children), pdb) }

func TestTheOperatorCachesANewChildKind(t *testing.T) {
	ours := labels.SelectorFromSet(labels.Set{render.ManagedByLabel: render.ManagedByValue})
	caches := controllers.ChildCaches(withPDB(), ours, nil)
	if len(caches) != len(render.Children)+1 {
		t.Fatalf("%d cache entries for %d child kinds", len(caches), len(render.Children)+1)
	}
	found := false
	for obj, by := range caches {
		if obj.GetObjectKind().GroupVersionKind() == pdb.GVK {
			found = true
			if by.Label == nil || by.Label.String() != ours.String() || by.Transform == nil {
				t.Errorf("the PodDisruptionBudget cache is not limited to the operator's objects and trimmed: %+v", by)
			}
		}
	}
	if !found {
		t.Error("no cache entry for the PodDisruptionBudget")
	}
}
