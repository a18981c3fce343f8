package nexoctl_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/nexo-io/nexo-edge/catalog"
	"github.com/nexo-io/nexo-edge/contract/wire"
	"github.com/nexo-io/nexo-edge/preflight/upgrade"
)

// nexoctl preflight --upgrade on a real API server whose installed NexoProxy CRD is an "older
// release": it has a field this build dropped (spec.legacyMode) and allows 1000 replicas (this
// build: 100). A proxy using both is reported by object, path and rule: its legacyMode as data
// the API server would prune, its replicas as refused by the new schema; the schema changes are
// classified; the exit code is 1. The upgrade edge follows the installed operator's version.
func TestPreflightUpgrade(t *testing.T) {
	ctx := context.Background()
	c, k8s := clusterWithCRDs(t)
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := k8s.Get(ctx, client.ObjectKey{Name: "nexoproxies.nexo.io"}, crd); err != nil {
		t.Fatal(err)
	}
	spec := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	spec.Properties["legacyMode"] = apiextensionsv1.JSONSchemaProps{Type: "string"}
	replicas := spec.Properties["replicas"]
	replicas.Maximum = ptr.To(1000.0)
	spec.Properties["replicas"] = replicas
	crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"] = spec
	if err := k8s.Update(ctx, crd); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"nexo-system", "team-a"} {
		if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	proxy := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "nexo.io/v1alpha1", "kind": "NexoProxy", "metadata": map[string]any{"name": "legacy", "namespace": "team-a"},
		"spec": map[string]any{"pipelineRef": map[string]any{"name": "p"}, "profileRef": map[string]any{"name": "std"}, "licenseRef": map[string]any{"name": "l"},
			"upstream": map[string]any{"name": "primary", "address": "mongo:27017"}, "replicas": int64(150), "legacyMode": "v1-wire"}}}
	// A proxy that selects an image its profile does not approve: this build refuses it.
	if err := k8s.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "nexo.io/v1alpha1", "kind": "NexoDeploymentProfile", "metadata": map[string]any{"name": "std", "namespace": "team-a"},
		"spec": map[string]any{"images": map[string]any{"ingress": "registry.example.com/nexo/ingress:0.2.0", "egress": "registry.example.com/nexo/egress:0.2.0"}}}}); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "nexo.io/v1alpha1", "kind": "NexoProxy", "metadata": map[string]any{"name": "pinned", "namespace": "team-a"},
		"spec": map[string]any{"pipelineRef": map[string]any{"name": "p"}, "profileRef": map[string]any{"name": "std"}, "licenseRef": map[string]any{"name": "l"},
			"upstream": map[string]any{"name": "primary", "address": "mongo:27017"}, "proxyImage": "registry.example.com/nexo/proxy:0.2.1"}}}); err != nil {
		t.Fatal(err)
	}
	// The API server takes the CRD update a moment later: until then it prunes legacyMode.
	deadline := time.Now().Add(30 * time.Second)
	for {
		p := proxy.DeepCopy()
		err := k8s.Create(ctx, p)
		if err == nil {
			if v, _, _ := unstructured.NestedString(p.Object, "spec", "legacyMode"); v == "v1-wire" {
				break
			}
			_ = k8s.Delete(ctx, p)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the legacy proxy was not stored with its fields: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	operator := func(version string) {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: wire.OperatorName, Namespace: "nexo-system"}}
		_, err := controllerutil.CreateOrUpdate(ctx, k8s, d, func() error {
			d.Labels = map[string]string{"app.kubernetes.io/version": version}
			d.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": "op"}}
			d.Spec.Template.Labels = map[string]string{"app": "op"}
			d.Spec.Template.Spec.Containers = []corev1.Container{{Name: "op", Image: "ghcr.io/nexo-io/nexo-operator:" + version}}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	report := func() (upgrade.Report, string, int) {
		out, errOut, code := run(t, "", "--kubeconfig", c.Kubeconfig, "preflight", "--upgrade", "-o", "json")
		var r upgrade.Report
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("%v: %s %s", err, out, errOut)
		}
		return r, errOut, code
	}
	operator("0.2.0")
	r, _, code := report()
	if code != 1 || !r.Breaking || !r.Edge.OK || r.Installed != "0.2.0" || r.ObjectsChecked != 3 {
		t.Errorf("exit %d, report %+v", code, r)
	}
	want := map[string]bool{"spec.legacyMode pruned": false, "spec.replicas schema": false}
	for _, f := range r.Objects {
		key := f.Path + " " + f.Rule
		if _, ok := want[key]; ok && f.Breaking && f.Namespace == "team-a" && f.Name == "legacy" && f.Kind == "NexoProxy" && f.Action != "" {
			want[key] = true
		}
	}
	for k, found := range want {
		if !found {
			t.Errorf("no breaking finding %q in %+v", k, r.Objects)
		}
	}
	rules := map[string]string{}
	for _, ch := range r.Schema.Changes {
		rules[ch.Path+" "+ch.Rule] = string(ch.Severity)
	}
	if rules["spec.legacyMode existingFieldRemoval"] != "breaking" || rules["spec.replicas maximum"] != "breaking" || len(r.Schema.Changes) != 2 {
		t.Errorf("schema changes %+v", r.Schema.Changes)
	}
	outcomes := map[string]upgrade.ProxyOutcome{}
	for _, p := range r.Proxies {
		outcomes[p.Name] = p
	}
	if len(r.Proxies) != 2 || outcomes["legacy"].Outcome != upgrade.OutcomeSkipped {
		t.Errorf("proxies %+v (the legacy proxy is not Ready: not predicted)", r.Proxies)
	}
	if p := outcomes["pinned"]; p.Outcome != upgrade.OutcomeRefused || !strings.Contains(p.Why, "NexoDeploymentProfile std") || !strings.Contains(p.Why, "registry.example.com/nexo/proxy:0.2.1") {
		t.Errorf("the proxy on an image its profile does not approve: %+v", p)
	}
	// The text names the object, the path, the rule and what to do; no secret is involved.
	out, _, _ := run(t, "", "--kubeconfig", c.Kubeconfig, "preflight", "--upgrade")
	if !strings.Contains(out, "breaks NexoProxy team-a/legacy spec.legacyMode [pruned]") || !strings.Contains(out, "copy the value of spec.legacyMode elsewhere") ||
		!strings.Contains(out, "would break something") || !strings.Contains(out, "refused team-a/pinned spec.proxyImage registry.example.com/nexo/proxy:0.2.1 is not approved") {
		t.Errorf("text:\n%s", out)
	}
	// Fixed: the object no longer uses what the new schema drops or refuses.
	live := &unstructured.Unstructured{}
	live.SetAPIVersion("nexo.io/v1alpha1")
	live.SetKind("NexoProxy")
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: "team-a", Name: "legacy"}, live); err != nil {
		t.Fatal(err)
	}
	unstructured.RemoveNestedField(live.Object, "spec", "legacyMode")
	_ = unstructured.SetNestedField(live.Object, int64(3), "spec", "replicas")
	if err := k8s.Update(ctx, live); err != nil {
		t.Fatal(err)
	}
	if r, _, _ := report(); len(r.Objects) != 0 {
		t.Errorf("after the fix: %+v", r.Objects)
	}
	// The upgrade edge: a newer installed version is a downgrade; an older one outside
	// catalog.UpgradesFrom has no edge.
	operator("9.0.0")
	if r, _, code := report(); code != 1 || r.Edge.OK || !strings.Contains(r.Edge.Message, "a downgrade is refused") {
		t.Errorf("downgrade: %d %+v", code, r.Edge)
	}
	operator("0.1.0")
	if r, _, _ := report(); r.Edge.OK || !strings.Contains(r.Edge.Message, "no upgrade edge from 0.1.0 to "+catalog.BuildVersion) {
		t.Errorf("no edge: %+v", r.Edge)
	}
}
