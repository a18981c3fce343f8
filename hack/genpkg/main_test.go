package main

import (
	"slices"
	"testing"

	policyv1 "k8s.io/api/policy/v1"

	"github.com/nexo-io/nexo-edge/controllers/render"
)

// The CSV declares every child kind of the table as a resource NexoProxy owns.
func TestCSVOwnsEveryChildKind(t *testing.T) {
	pdb := render.ChildKind{GVK: policyv1.SchemeGroupVersion.WithKind("PodDisruptionBudget")}
	got := ownedResources(append(slices.Clone(render.Children), pdb))
	if len(got) != len(render.Children)+1 || got[len(got)-1].Kind != "PodDisruptionBudget" || got[len(got)-1].Version != "v1" {
		t.Errorf("owned resources %+v", got)
	}
}
