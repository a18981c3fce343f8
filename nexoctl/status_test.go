package nexoctl_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/contract/wire"
	"github.com/nexo-io/nexo-edge/nexoctl"
	"github.com/nexo-io/nexo-edge/nexoctl/statuscmd"
	"github.com/nexo-io/nexo-edge/test/framework/syncbuffer"
	"github.com/nexo-io/nexo-edge/test/framework/terminal"
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
	// kubectl's output formats, through cli-runtime's and kubectl's printers over the objects.
	for _, c := range []struct{ output, want string }{
		{"name", "nexoproxy.nexo.io/billing-proxy\nnexoproxy.nexo.io/orders-proxy\n"},
		{"jsonpath={.items[*].metadata.name}", "billing-proxy orders-proxy"},
		{"jsonpath={.status.phase}", "Ready"}, // with NAME: the one object
		{"custom-columns=NAME:.metadata.name,PHASE:.status.phase", "NAME            PHASE\nbilling-proxy   Degraded\norders-proxy    Ready\n"},
	} {
		args := append(kc, "status", "-n", "shop", "-o", c.output)
		if strings.HasPrefix(c.output, "jsonpath={.status") {
			args = append(args, "orders-proxy")
		}
		if out, errOut, code := run(t, "", args...); code != 0 || out != c.want {
			t.Errorf("-o %s: exit %d\n%q, want %q\n%s", c.output, code, out, c.want, errOut)
		}
	}
	if out, _, _ := run(t, "", append(kc, "status", "-n", "shop", "-o", "wide")...); !strings.Contains(out, "AVAILABLE") || !strings.Contains(out, "PREVIOUS") {
		t.Errorf("-o wide lacks the revision columns:\n%s", out)
	}
	if _, errOut, code := run(t, "", append(kc, "status", "-n", "shop", "-o", "name", "--wait")...); code != 2 || !strings.Contains(errOut, "does not go with --watch or --wait") {
		t.Errorf("-o name --wait: exit %d %s", code, errOut)
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

	// --wait returns at once, exit 1 with the reason, when a proxy is Failed: waiting cannot help.
	failed := &nexov1alpha1.NexoProxy{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "billing-proxy"}, failed); err != nil {
		t.Fatal(err)
	}
	failed.Status.Phase = nexov1alpha1.ProxyFailed
	setReady(t, k8s, failed, metav1.ConditionFalse, "InvalidReference")
	if _, errOut, code := run(t, "", append(kc, "status", "-A", "--wait", "--timeout", "5m")...); code != 1 ||
		!strings.Contains(errOut, "waiting cannot make shop/billing-proxy (InvalidReference: InvalidReference) Ready") {
		t.Errorf("--wait over a Failed proxy: exit %d, want 1 at once, naming it and its reason: %s", code, errOut)
	}

	// --watch follows a watch: a change shows within seconds, well before the 30 s in which the
	// header is read again without one.
	watchCtx, stopWatch := context.WithCancel(ctx)
	var watchOut syncbuffer.Buffer
	watched := make(chan int)
	go func() {
		watched <- nexoctl.Main(watchCtx, append(kc, "status", "-n", "shop", "--watch"), strings.NewReader(""), &watchOut, &watchOut)
	}()
	waitOutput := func(what string, ok func(string) bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) { return ok(watchOut.String()), nil }); err != nil {
			t.Errorf("status --watch: %s did not show within 10s:\n%s", what, watchOut.String())
		}
	}
	waitOutput("the table", func(s string) bool { return strings.Contains(s, "orders-proxy") })
	failed.Status.Phase = nexov1alpha1.ProxyProgressing
	setReady(t, k8s, failed, metav1.ConditionFalse, "Progressing")
	waitOutput("billing-proxy's change", func(s string) bool { return strings.Contains(s, "Progressing") })
	stopWatch()
	if code := <-watched; code != 0 {
		t.Errorf("status --watch ended with exit %d when interrupted", code)
	}

	// On a terminal the phases are coloured; never with NO_COLOR, never with -o.
	onTerminal := func(args ...string) string {
		t.Helper()
		return terminal.Capture(t, func(tty *os.File) { nexoctl.Main(ctx, append(kc, args...), strings.NewReader(""), tty, tty) })
	}
	if screen := onTerminal("status", "-n", "shop"); !strings.Contains(screen, "\x1b[32mReady\x1b[0m") || !strings.Contains(screen, "\x1b[33mProgressing\x1b[0m") {
		t.Errorf("status on a terminal: the phases are not coloured:\n%q", screen)
	}
	if screen := onTerminal("status", "-n", "shop", "-o", "json"); strings.Contains(screen, "\x1b[") {
		t.Errorf("status -o json on a terminal has escapes:\n%q", screen)
	}
	// --wait on a terminal shows each proxy while it waits: the Ready one behind ✓, the one on its
	// way behind a spinner; then the table.
	if screen := onTerminal("status", "-n", "shop", "--wait", "--timeout", "2s"); !strings.Contains(screen, "Waiting for 2 NexoProxies in namespace shop to be Ready") ||
		!strings.Contains(screen, "✓ shop/orders-proxy  Ready 2/2") || !strings.Contains(screen, " shop/billing-proxy  Progressing 1/2") || !strings.Contains(screen, "NAMESPACE") {
		t.Errorf("status --wait on a terminal: no progress line per proxy, or no table after:\n%q", screen)
	}
	// ...and stops at once, behind ✗, when one is Failed.
	failed.Status.Phase = nexov1alpha1.ProxyFailed
	setReady(t, k8s, failed, metav1.ConditionFalse, "InvalidReference")
	started := time.Now()
	if screen := onTerminal("status", "-n", "shop", "--wait", "--timeout", "5m"); !strings.Contains(screen, "✗ shop/billing-proxy  Failed 1/2  (InvalidReference: InvalidReference)") ||
		!strings.Contains(screen, "waiting cannot make shop/billing-proxy") || time.Since(started) > time.Minute {
		t.Errorf("status --wait on a terminal over a Failed proxy, after %s:\n%q", time.Since(started), screen)
	}
	// Off a terminal, each change of a proxy is one line on the error stream.
	if _, errOut, code := run(t, "", append(kc, "status", "-n", "shop", "--wait", "--timeout", "5m")...); code != 1 ||
		!strings.Contains(errOut, "Waiting for 2 NexoProxies in namespace shop to be Ready (up to 5m0s): ✗ shop/billing-proxy  Failed 1/2") {
		t.Errorf("status --wait off a terminal: exit %d, no progress line:\n%s", code, errOut)
	}
	failed.Status.Phase = nexov1alpha1.ProxyProgressing
	setReady(t, k8s, failed, metav1.ConditionFalse, "Progressing")
	t.Setenv("NO_COLOR", "1")
	if screen := onTerminal("status", "-n", "shop"); strings.Contains(screen, "\x1b[") || !strings.Contains(screen, "Progressing") {
		t.Errorf("status with NO_COLOR has escapes:\n%q", screen)
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
