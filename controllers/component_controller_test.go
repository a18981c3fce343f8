package controllers_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
)

// The component controller reports each kind's own rules (api/v1alpha1/<kind>_funcs.go) on
// Ready, for the object's current generation, and follows edits.
func TestComponentRulesReachStatus(t *testing.T) {
	ctx := context.Background()
	ns := "components"
	graph := sampleGraph(t)
	create := func(kind, name string, edit func(u *unstructured.Unstructured)) {
		t.Helper()
		u := graph[kind].DeepCopy()
		u.SetNamespace(ns)
		u.SetName(name)
		edit(u)
		if err := k8s.Create(ctx, u); err != nil {
			t.Fatalf("create %s %s: %v", kind, name, err)
		}
	}
	// A route that an earlier one already covers.
	create("NexoRouter", "shadowed", func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedSlice(u.Object, []any{
			map[string]any{"database": "orders", "target": "primary"},
			map[string]any{"database": "orders", "collections": []any{"invoices"}, "target": "analytics"},
		}, "spec", "routes")
	})
	// A schema-only kind in a slot whose enum admits it.
	create("NexoPipeline", "guarded", func(u *unstructured.Unstructured) {
		_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"kind": "NexoQueryGuard", "name": "g"}}, "spec", "request")
	})
	create("NexoRateLimit", "fine", func(*unstructured.Unstructured) {})

	for _, tc := range []struct {
		kind, name, reason string
		words              []string
	}{
		{"NexoRouter", "shadowed", nexov1alpha1.ReasonInvalidSpec, []string{"spec.routes[1]", "never match"}},
		{"NexoPipeline", "guarded", nexov1alpha1.ReasonUnsupportedReference, []string{"spec.request[0].kind", "NexoQueryGuard"}},
		{"NexoRateLimit", "fine", nexov1alpha1.ReasonValid, nil},
	} {
		c := waitReady(t, ns, tc.kind, tc.name, func(c *metav1.Condition) bool { return c.Reason == tc.reason })
		for _, w := range tc.words {
			if !strings.Contains(c.Message, w) {
				t.Errorf("%s %s: message %q does not name %q", tc.kind, tc.name, c.Message, w)
			}
		}
	}

	// Fixing the router makes it Ready for its new generation.
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(nexov1alpha1.GroupVersion.WithKind("NexoRouter"))
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shadowed"}, u); err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"database": "orders", "target": "primary"}}, "spec", "routes")
	if err := k8s.Update(ctx, u); err != nil {
		t.Fatal(err)
	}
	waitReady(t, ns, "NexoRouter", "shadowed", func(c *metav1.Condition) bool {
		return c.Status == metav1.ConditionTrue && c.ObservedGeneration == u.GetGeneration()
	})
}

// waitReady polls a Nexo object until its Ready condition, for its current generation, satisfies ok.
func waitReady(t *testing.T, ns, kind, name string, ok func(*metav1.Condition) bool) *metav1.Condition {
	t.Helper()
	o, err := k8s.Scheme().New(nexov1alpha1.GroupVersion.WithKind(kind))
	if err != nil {
		t.Fatal(err)
	}
	obj := o.(nexov1alpha1.Object)
	var last *metav1.Condition
	err = wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		last = meta.FindStatusCondition(obj.NexoStatus().Conditions, nexov1alpha1.ConditionReady)
		return last != nil && last.ObservedGeneration == obj.GetGeneration() && obj.NexoStatus().ObservedGeneration == obj.GetGeneration() && ok(last), nil
	})
	if err != nil {
		t.Fatalf("%s %s/%s: Ready is %+v", kind, ns, name, last)
	}
	return last
}
