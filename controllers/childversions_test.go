package controllers

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/nexo-io/nexo-edge/controllers/render"
)

func TestChildVersions(t *testing.T) {
	p := types.NamespacedName{Namespace: "ns", Name: "edge"}
	other := types.NamespacedName{Namespace: "ns", Name: "other"}
	dep := childID{"Deployment", "edge"}
	cm := childID{"ConfigMap", "edge-steps-abc"}
	svc := childID{"Service", "edge"}
	a, b := render.Hash{1}, render.Hash{2}

	var v childVersions
	if v.is(p, dep, childVersion{"1", a}) {
		t.Fatal("an empty record knows no child")
	}
	v.set(p, dep, childVersion{"1", a})
	v.set(p, cm, childVersion{"7", b})
	v.set(p, svc, childVersion{"9", a})

	cases := []struct {
		name  string
		proxy types.NamespacedName
		id    childID
		want  childVersion
		is    bool
	}{
		{"same version and content", p, dep, childVersion{"1", a}, true},
		{"new version", p, dep, childVersion{"2", a}, false},
		{"new content", p, dep, childVersion{"1", b}, false},
		{"another kind of the same name", p, childID{"Service", "edge"}, childVersion{"1", a}, false},
		{"the other kind's own version", p, svc, childVersion{"9", a}, true},
		{"another child", p, childID{"ConfigMap", "edge-steps-def"}, childVersion{"7", b}, false},
		{"another proxy", other, dep, childVersion{"1", a}, false},
		{"a version that is a prefix", p, cm, childVersion{"", b}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := v.is(c.proxy, c.id, c.want); got != c.is {
				t.Fatalf("is = %v, want %v", got, c.is)
			}
		})
	}

	// set replaces a child's entry in place; the slice has exactly one entry per child.
	v.set(p, dep, childVersion{"2", b})
	if !v.is(p, dep, childVersion{"2", b}) || v.is(p, dep, childVersion{"1", a}) {
		t.Fatal("set did not replace the Deployment's entry")
	}
	if got := v.byProxy[p]; len(got) != 3 || cap(got) != 3 {
		t.Fatalf("entries: len %d cap %d, want 3 and 3", len(got), cap(got))
	}

	v.forgetChild(p, cm)
	if v.is(p, cm, childVersion{"7", b}) {
		t.Fatal("forgetChild kept the ConfigMap")
	}
	if !v.is(p, dep, childVersion{"2", b}) || !v.is(p, svc, childVersion{"9", a}) {
		t.Fatal("forgetChild dropped another child")
	}
	v.forgetChild(other, cm) // unknown proxy: nothing to do
	v.forget(p)
	if v.is(p, svc, childVersion{"9", a}) || len(v.byProxy) != 0 {
		t.Fatal("forget kept the proxy")
	}
}
