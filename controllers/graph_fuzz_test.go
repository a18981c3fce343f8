package controllers

import (
	"context"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/catalog"
	"github.com/nexo-io/nexo-edge/contract/wire"
	"github.com/nexo-io/nexo-edge/controllers/render"
	"github.com/nexo-io/nexo-edge/controllers/slimcache"
	"github.com/nexo-io/nexo-edge/test/framework/randomgraph"
)

// FuzzResolveGraph resolves random graphs: pipelines whose refs name any catalog kind
// (schema-only ones too), unknown kinds and non-Nexo kinds, in any slot, with duplicates and
// self-references; referenced objects present or missing, Ready or not; a profile naming pull
// Secrets that are missing, shareable or not. Resolution never panics or errs on its own, every
// refusal has a reason and a message, the outcome is the same on a second pass, and a resolved
// graph holds only reconciled kinds in the slots the catalog allows.
func FuzzResolveGraph(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1})
	f.Add([]byte{0, 3, 2, 7, 1, 5, 9, 200, 13, 4, 4, 4, 4, 1, 2, 3, 255, 255, 255, 0, 1})
	f.Add([]byte("router-request-response-connection-observability"))
	f.Add(resolvingGraph("NexoRouter"))
	f.Add(resolvingGraph("NexoTrafficSplit"))
	f.Fuzz(func(t *testing.T, data []byte) { resolveRandomGraph(t, data) })
}

// The seed graphs that resolve do (so the fuzzer starts from both sides of every check).
func TestResolvingSeedGraphsResolve(t *testing.T) {
	for _, router := range []string{"NexoRouter", "NexoTrafficSplit"} {
		if got := resolveRandomGraph(t, resolvingGraph(router)); !strings.HasPrefix(got, "resolved") {
			t.Errorf("%s: %s", router, got)
		}
	}
}

var (
	fuzzKinds = func() []string {
		kinds := []string{"NexoNope", "ConfigMap", "NexoPipeline", "NexoProxy"}
		for _, k := range catalog.Kinds {
			kinds = append(kinds, k.Kind)
		}
		return kinds
	}()
	fuzzNames = []string{"a", "b", "p"}
)

// fuzzHeld are the kinds resolveRandomGraph creates objects of (under every pool name, by choice).
func fuzzHeld(k catalog.Kind) bool {
	return k.Support == catalog.Reconciled && k.Kind != "NexoPipeline" && k.Kind != "NexoProxy" && k.Kind != "NexoLicense" && k.Kind != "NexoDeploymentProfile"
}

// resolvingGraph is the input for which resolveRandomGraph builds a graph that resolves: a
// pipeline with only router "a" of the given kind, Ready, a profile naming the shareable pull
// Secret, a license.
func resolvingGraph(router string) []byte {
	b := []byte{0, byte(slices.Index(fuzzKinds, router)), 0, 0, 0, 0, 1, 1, 0}
	for _, k := range catalog.Kinds {
		if !fuzzHeld(k) {
			continue
		}
		for _, name := range fuzzNames {
			if k.Kind == router && name == "a" {
				b = append(b, 1, 1) // present, Ready
			} else {
				b = append(b, 0) // absent
			}
		}
	}
	return append(b, 1, 0, 1, 1, 1) // one pull Secret "reg"; profile present, Ready; license
}

// resolveRandomGraph builds the graph data describes and resolves it twice; it returns the
// outcome (the refusal, or "resolved" and the revision).
func resolveRandomGraph(t *testing.T, data []byte) string {
	t.Helper()
	kinds, names := fuzzKinds, fuzzNames
	scheme := runtime.NewScheme()
	_ = nexov1alpha1.AddToScheme(scheme)
	_ = corev1.AddToScheme(scheme)
	{
		in := randomgraph.Decisions(data)
		ctx := context.Background()
		ns, opNS := "shop", "nexo-system"
		ready := func(o nexov1alpha1.Object) {
			if in.Next()%4 != 0 { // mostly Ready
				setCondition(o, nexov1alpha1.ConditionReady, metav1.ConditionTrue, "Passed", "ok")
			}
		}
		var objs []client.Object
		pipeline := &nexov1alpha1.NexoPipeline{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns}}
		if in.Next()%2 == 0 {
			pipeline.Spec.Router = &nexov1alpha1.RouterRef{Kind: in.Pick(kinds), Name: in.Pick(names)}
		}
		for i := in.Next() % 4; i > 0; i-- {
			pipeline.Spec.Request = append(pipeline.Spec.Request, nexov1alpha1.RequestStepRef{Kind: in.Pick(kinds), Name: in.Pick(names)})
		}
		for i := in.Next() % 4; i > 0; i-- {
			pipeline.Spec.Response = append(pipeline.Spec.Response, nexov1alpha1.ResponseStepRef{Kind: in.Pick(kinds), Name: in.Pick(names)})
		}
		for i := in.Next() % 3; i > 0; i-- {
			pipeline.Spec.Connection = append(pipeline.Spec.Connection, nexov1alpha1.ConnectionStepRef{Kind: in.Pick(kinds), Name: in.Pick(names)})
		}
		if in.Next()%8 != 0 {
			ready(pipeline)
			objs = append(objs, pipeline)
		}
		proxy := &nexov1alpha1.NexoProxy{ObjectMeta: metav1.ObjectMeta{Name: "px", Namespace: ns}, Spec: nexov1alpha1.NexoProxySpec{
			PipelineRef: nexov1alpha1.LocalObjectReference{Name: "p"}, ProfileRef: nexov1alpha1.LocalObjectReference{Name: "prof"},
			LicenseRef: nexov1alpha1.LocalObjectReference{Name: "lic"}, Upstream: nexov1alpha1.Target{Name: "t", Address: "db:27017"}}}
		for i := in.Next() % 3; i > 0; i-- {
			proxy.Spec.ObservabilityRefs = append(proxy.Spec.ObservabilityRefs, nexov1alpha1.ObservabilityRef{Kind: in.Pick(kinds), Name: in.Pick(names)})
		}
		// Objects of any reconciled kind under the pool's names, some missing, some not Ready.
		for _, k := range catalog.Kinds {
			if !fuzzHeld(k) {
				continue
			}
			for _, name := range names {
				if in.Next()%3 == 0 {
					continue
				}
				o, err := scheme.New(nexov1alpha1.GroupVersion.WithKind(k.Kind))
				if err != nil {
					t.Fatal(err)
				}
				obj := o.(nexov1alpha1.Object)
				obj.SetName(name)
				obj.SetNamespace(ns)
				ready(obj)
				objs = append(objs, obj)
			}
		}
		profile := &nexov1alpha1.NexoDeploymentProfile{ObjectMeta: metav1.ObjectMeta{Name: "prof", Namespace: ns}}
		for i := in.Next() % 3; i > 0; i-- {
			profile.Spec.ImagePullSecrets = append(profile.Spec.ImagePullSecrets, nexov1alpha1.SecretReference{Name: in.Pick([]string{"reg", "token", "gone"})})
		}
		if in.Next()%8 != 0 {
			ready(profile)
			objs = append(objs, profile)
		}
		if in.Next()%8 != 0 {
			objs = append(objs, &nexov1alpha1.NexoLicense{ObjectMeta: metav1.ObjectMeta{Name: "lic", Namespace: ns}})
		}
		objs = append(objs,
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "reg", Namespace: opNS, Labels: map[string]string{wire.RegistryCredentialLabel: "true"}}, Type: corev1.SecretTypeDockerConfigJson},
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "token", Namespace: opNS}, Type: corev1.SecretTypeOpaque},
			proxy)

		c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
		r := &ProxyReconciler{Client: c, APIReader: c, Scheme: scheme, OperatorNamespace: opNS,
			secretMeta: slimcache.For[*slimcache.ChildMeta](&slimcache.Registry{}, corev1.SchemeGroupVersion.WithKind("Secret"), true)}
		outcome := func() string {
			res, b, err := r.resolve(ctx, proxy)
			if err != nil {
				t.Fatalf("resolve erred on its own: %v", err)
			}
			if b != nil {
				if b.reason == "" || b.message == "" {
					t.Fatalf("a refusal without a reason or message: %+v", b)
				}
				return b.reason + ": " + b.message
			}
			g := res.graph
			if g.Router != nil {
				checkResolved(t, *g.Router, catalog.SlotRouter)
			}
			for _, s := range g.Steps {
				checkResolved(t, s, s.Slot)
			}
			for _, s := range g.Observability {
				checkResolved(t, s, catalog.SlotObservability)
			}
			for _, s := range res.pullSecrets {
				if !shareable(s) {
					t.Fatalf("resolved with the unshareable pull Secret %s", s.Name)
				}
			}
			return "resolved " + render.Revision(g)
		}
		first, second := outcome(), outcome()
		if first != second {
			t.Fatalf("two passes over the same graph differ:\n%s\n%s", first, second)
		}
		return first
	}
}

func checkResolved(t *testing.T, c render.Component, slot catalog.Slot) {
	t.Helper()
	k, ok := catalog.Lookup(c.Kind)
	if !ok || k.Support != catalog.Reconciled || !k.AllowedIn(slot) {
		t.Fatalf("resolved graph holds %s %s in slot %s", c.Kind, c.Name, slot)
	}
}
