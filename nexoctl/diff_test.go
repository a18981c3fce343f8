package nexoctl_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/catalog"
	"github.com/nexo-io/nexo-edge/contract/protocol"
	"github.com/nexo-io/nexo-edge/test/framework/testcluster"
)

// nexoctl diff against a real API server: the sample graph as it runs is no change (exit 0); a
// faster rate limit changes one field and rolls the proxy on that pipeline (exit 1); a burst
// below the rate is refused by the kind's CEL rule (exit 1); a Deployment is not previewed
// (exit 2); and nothing is ever written.
func TestDiff(t *testing.T) {
	ctx := context.Background()
	c, k8s := clusterWithCRDs(t)
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}); err != nil {
		t.Fatal(err)
	}
	samples, err := testcluster.Samples()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write := func(name string, edit func(u *unstructured.Unstructured)) string {
		var docs []string
		for _, k := range catalog.Kinds {
			u := samples[k.Kind].DeepCopy()
			if k.Support != catalog.Reconciled {
				continue
			}
			u.SetNamespace("shop")
			if edit != nil {
				edit(u)
			}
			b, _ := yaml.Marshal(u.Object)
			docs = append(docs, string(b))
		}
		p := filepath.Join(dir, name)
		_ = os.WriteFile(p, []byte(strings.Join(docs, "---\n")), 0o644)
		return p
	}
	for _, k := range catalog.Kinds {
		if k.Support != catalog.Reconciled {
			continue
		}
		u := samples[k.Kind].DeepCopy()
		u.SetNamespace("shop")
		if err := k8s.Create(ctx, u); err != nil {
			t.Fatal(err)
		}
		o, _ := k8s.Scheme().New(nexov1alpha1.GroupVersion.WithKind(k.Kind))
		obj := o.(nexov1alpha1.Object)
		_ = k8s.Get(ctx, client.ObjectKeyFromObject(u), obj)
		if p, ok := obj.(*nexov1alpha1.NexoProxy); ok {
			p.Status.GraphRevision = "running0001"
		}
		setReady(t, k8s, obj, metav1.ConditionTrue, "Valid")
	}
	versions := func() map[string]string {
		out, err := testcluster.ResourceVersions(ctx, k8s, "shop")
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	before := versions()
	kc := []string{"--kubeconfig", c.Kubeconfig, "-n", "shop"}

	out, errOut, code := run(t, "", append(kc, "diff", "-f", write("same.yaml", nil))...)
	if code != 0 || !strings.Contains(out, "0 created, 0 changed") || !strings.Contains(out, "shop/orders-proxy") || !strings.Contains(out, "unchanged") {
		t.Errorf("diff of what runs: exit %d\n%s%s", code, out, errOut)
	}
	faster := write("faster.yaml", func(u *unstructured.Unstructured) {
		if u.GetKind() == "NexoRateLimit" {
			_ = unstructured.SetNestedField(u.Object, int64(700), "spec", "operationsPerSecond")
		}
	})
	out, errOut, code = run(t, "", append(kc, "diff", "-f", faster)...)
	if code != 1 || !regexp.MustCompile(`NexoRateLimit shop/per-client +changed`).MatchString(out) || errOut != "" || !strings.Contains(out, "replace /spec/operationsPerSecond = 700") ||
		!strings.Contains(out, "running0001 → ") || !strings.Contains(out, "rolls") || !strings.Contains(out, "1 changed") {
		t.Errorf("diff of a faster rate limit: exit %d\n%s%s", code, out, errOut)
	}
	out, _, code = run(t, "", append(kc, "diff", "-f", faster, "-o", "json")...)
	var res protocol.PreviewResult
	if err := json.Unmarshal([]byte(out), &res); code != 1 || err != nil || res.Summary.Changed != 1 || res.Summary.Rolls != 1 || len(res.Proxies) != 1 || res.Proxies[0].Before != "running0001" {
		t.Errorf("diff -o json: exit %d %v %+v", code, err, res)
	}
	out, errOut, code = run(t, "", append(kc, "diff", "-f", write("bad.yaml", func(u *unstructured.Unstructured) {
		if u.GetKind() == "NexoRateLimit" {
			_ = unstructured.SetNestedField(u.Object, int64(10), "spec", "burst")
		}
	}))...)
	if code != 1 || !strings.Contains(out, "refused") || !strings.Contains(out, "burst must be at least operationsPerSecond") {
		t.Errorf("diff of an invalid object: exit %d\n%s%s", code, out, errOut)
	}
	deployment := filepath.Join(dir, "deployment.yaml")
	_ = os.WriteFile(deployment, []byte("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\n"), 0o644)
	if _, errOut, code = run(t, "", append(kc, "diff", "-f", deployment)...); code != 2 || !strings.Contains(errOut, "not a Nexo kind") {
		t.Errorf("diff of a Deployment: exit %d %s", code, errOut)
	}
	after := versions()
	for k, v := range before {
		if after[k] != v {
			t.Errorf("nexoctl diff wrote %s", k)
		}
	}
}
