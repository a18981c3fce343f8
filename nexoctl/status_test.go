package nexoctl_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/contract/wire"
	"github.com/nexo-io/nexo-edge/nexoctl/statuscmd"
	"github.com/nexo-io/nexo-edge/test/framework/testcluster"
)

var ages = regexp.MustCompile(`\b\d+(s|m|h|d)\d*(s|m)?\b`)

func golden(t *testing.T, name, got string) {
	t.Helper()
	got = ages.ReplaceAllString(got, "<age>")
	path := filepath.Join("testdata", name)
	if *update {
		_ = os.WriteFile(path, []byte(got), 0o644)
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (run with -update to accept):\n%s", path, got)
	}
}

func setReady(t *testing.T, k8s client.Client, o nexov1alpha1.Object, status metav1.ConditionStatus, reason string) {
	t.Helper()
	meta.SetStatusCondition(&o.NexoStatus().Conditions, metav1.Condition{Type: "Ready", Status: status, Reason: reason, Message: reason, ObservedGeneration: o.GetGeneration()})
	o.NexoStatus().ObservedGeneration = o.GetGeneration()
	if err := k8s.Status().Update(context.Background(), o); err != nil {
		t.Fatal(err)
	}
}

func TestStatus(t *testing.T) {
	ctx := context.Background()
	c, k8s := clusterWithCRDs(t)
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}); err != nil {
		t.Fatal(err)
	}
	// The sample graph, minus the license (a missing node in the tree).
	samples, err := testcluster.Samples()
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range samples {
		if u.GetKind() == "NexoLicense" {
			continue
		}
		u.SetNamespace("shop")
		if err := k8s.Create(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	for _, kind := range []string{"NexoPipeline", "NexoRouter", "NexoTenantIsolation", "NexoRateLimit", "NexoCommandPolicy", "NexoAuthPolicy", "NexoPIIMasking", "NexoResponseLimit", "NexoConnectionPool", "NexoConnectionLimit", "NexoMetrics", "NexoTracing", "NexoAuditLog", "NexoAccessLog", "NexoDeploymentProfile"} {
		list := &unstructured.UnstructuredList{}
		list.SetAPIVersion("nexo.io/v1alpha1")
		list.SetKind(kind + "List")
		if err := k8s.List(ctx, list, client.InNamespace("shop")); err != nil || len(list.Items) != 1 {
			t.Fatalf("%s: %v", kind, err)
		}
		o, _ := k8s.Scheme().New(nexov1alpha1.GroupVersion.WithKind(kind))
		obj := o.(nexov1alpha1.Object)
		_ = k8s.Get(ctx, client.ObjectKeyFromObject(&list.Items[0]), obj)
		if kind == "NexoRateLimit" {
			setReady(t, k8s, obj, metav1.ConditionFalse, "SignatureMismatch")
		} else {
			setReady(t, k8s, obj, metav1.ConditionTrue, "Valid")
		}
	}
	// A second proxy, Degraded; the sample proxy is Ready.
	ready := &nexov1alpha1.NexoProxy{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "orders-proxy"}, ready); err != nil {
		t.Fatal(err)
	}
	ready.Status.Phase, ready.Status.ReadyReplicas, ready.Status.Replicas, ready.Status.GraphRevision = nexov1alpha1.ProxyReady, 2, 2, "dc1adf1235df"
	setReady(t, k8s, ready, metav1.ConditionTrue, "Available")
	degraded := ready.DeepCopy()
	degraded.ObjectMeta = metav1.ObjectMeta{Name: "billing-proxy", Namespace: "shop"}
	degraded.Status = nexov1alpha1.NexoProxyStatus{}
	if err := k8s.Create(ctx, degraded); err != nil {
		t.Fatal(err)
	}
	degraded.Status.Phase, degraded.Status.ReadyReplicas, degraded.Status.Replicas, degraded.Status.GraphRevision = nexov1alpha1.ProxyDegraded, 1, 2, "0a1b2c3d4e5f"
	setReady(t, k8s, degraded, metav1.ConditionFalse, "ReferenceNotReady")

	kc := []string{"--kubeconfig", c.Kubeconfig}
	out, _, code := run(t, "", append(kc, "status", "-A")...)
	if code != 1 {
		t.Errorf("status with a Degraded proxy: exit %d, want 1", code)
	}
	golden(t, "status-table.txt", out)

	out, _, code = run(t, "", append(kc, "status", "orders-proxy", "-n", "shop")...)
	if code != 0 {
		t.Errorf("status of a Ready proxy: exit %d", code)
	}
	golden(t, "status-detail.txt", out)

	out, _, _ = run(t, "", append(kc, "status", "-A", "-o", "json")...)
	var st statuscmd.Status
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("-o json: %v\n%s", err, out)
	}
	if len(st.Proxies) != 2 || st.AllReady || st.Operator.Found {
		t.Errorf("json status: %+v", st)
	}
	if _, _, code := run(t, "", append(kc, "status", "-A", "--wait", "--timeout", "1s")...); code != 1 {
		t.Errorf("--wait that times out: exit %d, want 1", code)
	}
	// An empty selection is never a success.
	if out, errOut, code := run(t, "", append(kc, "status", "-A", "-l", "team=none")...); code != 1 || !regexp.MustCompile(`no NexoProxies in all namespaces matching team=none`).MatchString(out+errOut) {
		t.Errorf("empty selector result: exit %d\n%s%s", code, out, errOut)
	}

	// The namespace comes from the kubeconfig context, as for kubectl.
	cfg, err := clientcmd.LoadFromFile(c.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Contexts[cfg.CurrentContext].Namespace = "shop"
	inShop := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, inShop); err != nil {
		t.Fatal(err)
	}
	out, _, code = run(t, "", "--kubeconfig", inShop, "status", "-o", "json")
	st = statuscmd.Status{}
	if err := json.Unmarshal([]byte(out), &st); err != nil || len(st.Proxies) != 2 || st.Scope != "namespace shop" || code != 1 {
		t.Errorf("status in the context's namespace shop: exit %d, %d proxies, scope %q (%v)", code, len(st.Proxies), st.Scope, err)
	}
	if _, errOut, code := run(t, "", "--kubeconfig", inShop, "status", "-n", "default"); code != 1 || !strings.Contains(errOut, "no NexoProxies in namespace default") {
		t.Errorf("-n default over the context's namespace: exit %d %s", code, errOut)
	}

	// Dynamic completion (what `nexoctl completion bash` calls): proxy names of the namespace,
	// namespaces, -o values.
	if out, _, _ := run(t, "", "--kubeconfig", inShop, "__complete", "status", "or"); !strings.Contains(out, "orders-proxy") || strings.Contains(out, "billing-proxy") {
		t.Errorf("completion of status or…:\n%s", out)
	}
	if out, _, _ := run(t, "", append(kc, "__complete", "status", "-n", "sh")...); !strings.Contains(out, "shop\n") {
		t.Errorf("completion of -n sh…:\n%s", out)
	}
	if out, _, _ := run(t, "", "__complete", "status", "-o", ""); !strings.Contains(out, "json\n") || !strings.Contains(out, "yaml\n") {
		t.Errorf("completion of -o:\n%s", out)
	}

	// kubectl's identity flags: impersonating a user without rights is refused by the API server.
	if _, errOut, code := run(t, "", append(kc, "status", "-A", "--as", "nobody", "--as-group", "nobodies")...); code != 2 || !strings.Contains(errOut, `"nobody" cannot list`) {
		t.Errorf("status --as nobody: exit %d, want 2 and the API server's refusal: %s", code, errOut)
	}
}

// nexoctl status shows the Manager's limits as it reports them: where it may deploy and which
// image repositories a rollout may name; an empty limit says "nowhere".
func TestStatusShowsTheManagersLimit(t *testing.T) {
	ctx := context.Background()
	c, k8s := clusterWithCRDs(t)
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "nexo-system"}}); err != nil {
		t.Fatal(err)
	}
	one := int32(1)
	mgr := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: wire.ManagerName, Namespace: "nexo-system", Labels: map[string]string{"app.kubernetes.io/name": wire.ManagerName}},
		Spec: appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "mgr"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "mgr"}}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: "ghcr.io/nexo-io/nexo-manager:0.3.0"}}}}}}
	status := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: wire.ManagerStatusConfigMap, Namespace: "nexo-system"},
		Data: map[string]string{wire.StatusDeployNamespaces: "shop,payments", wire.StatusImageRepositories: "registry.example.com/nexo/proxy"}}
	for _, o := range []client.Object{mgr, status} {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	kc := []string{"--kubeconfig", c.Kubeconfig}
	out, _, _ := run(t, "", append(kc, "status", "-A")...)
	if !strings.Contains(out, "deploys into shop,payments, images from registry.example.com/nexo/proxy") {
		t.Errorf("status header:\n%s", out)
	}
	raw, _, _ := run(t, "", append(kc, "status", "-A", "-o", "json")...)
	var st statuscmd.Status
	if err := json.Unmarshal([]byte(raw), &st); err != nil || st.Manager.Limits == nil || strings.Join(st.Manager.Limits.Namespaces, ",") != "shop,payments" {
		t.Errorf("status -o json: %v %+v", err, st.Manager)
	}
	status.Data = map[string]string{wire.StatusDeployNamespaces: "", wire.StatusImageRepositories: ""}
	if err := k8s.Update(ctx, status); err != nil {
		t.Fatal(err)
	}
	if out, _, _ := run(t, "", append(kc, "status", "-A")...); !strings.Contains(out, "deploys into nowhere (the cluster's limit is empty)") {
		t.Errorf("status header with an empty limit:\n%s", out)
	}
}
