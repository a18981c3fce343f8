package main

import (
	"slices"
	"strings"
	"testing"

	policyv1 "k8s.io/api/policy/v1"

	"github.com/nexo-io/nexo-edge/catalog"
	"github.com/nexo-io/nexo-edge/controllers/render"
)

// A child kind added to the table gets its RBAC marker; a reconciled kind gets read and status
// rights, a schema-only kind none.
func TestMarkersFollowTheChildTable(t *testing.T) {
	pdb := render.ChildKind{GVK: policyv1.SchemeGroupVersion.WithKind("PodDisruptionBudget"), Resource: "poddisruptionbudgets", Verbs: []string{"get", "create"}}
	src, err := markers(catalog.Kinds, append(slices.Clone(render.Children), pdb))
	if err != nil {
		t.Fatal(err)
	}
	s := string(src)
	if !strings.Contains(s, "// +kubebuilder:rbac:groups=policy,resources=poddisruptionbudgets,verbs=get;create\n") {
		t.Errorf("no marker for the new child kind:\n%s", s)
	}
	for _, k := range catalog.Kinds {
		has := strings.Contains(s, ";"+k.Plural+";") || strings.Contains(s, "="+k.Plural+";") || strings.Contains(s, ";"+k.Plural+",")
		if has != (k.Support == catalog.Reconciled) {
			t.Errorf("%s (%s): marker present %v", k.Kind, k.Support, has)
		}
	}
}
