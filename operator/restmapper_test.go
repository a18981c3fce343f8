package operator

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

type countingMapper struct {
	meta.RESTMapper
	calls int
}

func (c *countingMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	c.calls++
	return c.RESTMapper.RESTMapping(gk, versions...)
}

func TestRememberingMapper(t *testing.T) {
	gv := schema.GroupVersion{Group: "nexo.io", Version: "v1alpha1"}
	def := meta.NewDefaultRESTMapper([]schema.GroupVersion{gv})
	def.Add(gv.WithKind("NexoProxy"), meta.RESTScopeNamespace)
	under := &countingMapper{RESTMapper: def}
	m := &rememberingMapper{RESTMapper: under, mappings: map[mappingKey]*meta.RESTMapping{}}

	for range 3 {
		got, err := m.RESTMapping(schema.GroupKind{Group: "nexo.io", Kind: "NexoProxy"}, "v1alpha1")
		if err != nil || got.Scope.Name() != meta.RESTScopeNameNamespace {
			t.Fatalf("mapping %v, %v", got, err)
		}
	}
	if under.calls != 1 {
		t.Errorf("underlying mapper asked %d times for one kind, want 1", under.calls)
	}
	// A miss is not remembered: a kind installed later is found.
	gk := schema.GroupKind{Group: "nexo.io", Kind: "NexoPipeline"}
	if _, err := m.RESTMapping(gk, "v1alpha1"); !meta.IsNoMatchError(err) {
		t.Fatalf("unknown kind: %v", err)
	}
	def.Add(gv.WithKind("NexoPipeline"), meta.RESTScopeNamespace)
	if _, err := m.RESTMapping(gk, "v1alpha1"); err != nil {
		t.Errorf("kind added later: %v", err)
	}
}
