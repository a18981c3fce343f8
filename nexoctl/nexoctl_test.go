package nexoctl_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/nexo-io/nexo-edge/contract/signature"
	"github.com/nexo-io/nexo-edge/contract/wire"
	"github.com/nexo-io/nexo-edge/nexoctl"
	"github.com/nexo-io/nexo-edge/preflight"
	"github.com/nexo-io/nexo-edge/test/framework/testcluster"
)

var update = flag.Bool("update", false, "rewrite golden files")

// run executes nexoctl in-process with a non-terminal stdout.
func run(t *testing.T, stdin string, args ...string) (string, string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := nexoctl.Main(context.Background(), args, strings.NewReader(stdin), &out, &errOut)
	return out.String(), errOut.String(), code
}

// clusterWithCRDs starts an API server with the CRDs, stopped when the test ends, and a client
// for built-in, CRD and Nexo kinds.
func clusterWithCRDs(t *testing.T) (*testcluster.Cluster, client.Client) {
	t.Helper()
	c, err := testcluster.Start(context.Background(), testcluster.Options{CRDDirectoryPaths: []string{testcluster.CRDDir()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	env, err := preflight.NewClusterEnv(c.Config, "nexo-system")
	if err != nil {
		t.Fatal(err)
	}
	return c, env.Client
}

// findCheck finds a result by its stable check id.
func findCheck(t *testing.T, r preflight.Report, id string) preflight.Result {
	t.Helper()
	res, ok := r.ByID(id)
	if !ok {
		t.Fatalf("no check %q", id)
	}
	return res
}

func samplesDir() string { return filepath.Join(testcluster.RepoRoot(), "config", "samples") }

// writeDir copies the samples into a temp folder and adds extra documents.
func writeDir(t *testing.T, extra map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	files, _ := filepath.Glob(filepath.Join(samplesDir(), "nexo.io_*.yaml"))
	for _, f := range files {
		raw, _ := os.ReadFile(f)
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, content := range extra {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestOfflinePreflightGolden(t *testing.T) {
	out, _, code := run(t, "", "preflight", "-f", samplesDir())
	if code != 0 {
		t.Fatalf("exit %d, want 0 (warnings only)", code)
	}
	if strings.Contains(out, "\x1b[") {
		t.Error("ANSI escapes in output that is not a terminal")
	}
	golden := filepath.Join("testdata", "preflight-offline-samples.txt")
	if *update {
		_ = os.WriteFile(golden, []byte(out), 0o644)
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if out != string(want) {
		t.Errorf("output differs from %s (run with -update to accept):\n%s", golden, out)
	}
}

func TestOfflinePreflightFindsBadReferencesAndUnpinnedImages(t *testing.T) {
	dir := writeDir(t, map[string]string{
		"guarded.yaml": `apiVersion: nexo.io/v1alpha1
kind: NexoPipeline
metadata: {name: guarded, namespace: shop}
spec:
  request:
  - {kind: NexoRateLimit, name: per-client}
  - {kind: NexoQueryGuard, name: no-where}
`,
		"deploy.yaml": `apiVersion: apps/v1
kind: Deployment
metadata: {name: app}
spec:
  template:
    spec:
      containers:
      - {name: a, image: "registry.example.com/app:latest"}
      - {name: b, image: "registry.example.com/tool"}
`,
	})
	// The same manifests plus a proxy on :latest, as one CRLF List on stdin.
	list := strings.ReplaceAll(`apiVersion: v1
kind: List
items:
- apiVersion: nexo.io/v1alpha1
  kind: NexoPipeline
  metadata: {name: guarded, namespace: shop}
  spec:
    request:
    - {kind: NexoRateLimit, name: per-client}
    - {kind: NexoQueryGuard, name: no-where}
- apiVersion: apps/v1
  kind: Deployment
  metadata: {name: app}
  spec:
    template:
      spec:
        containers:
        - {name: a, image: "registry.example.com/app:latest"}
        - {name: b, image: "registry.example.com/tool"}
- apiVersion: nexo.io/v1alpha1
  kind: NexoProxy
  metadata: {name: p, namespace: shop}
  spec: {proxyImage: "registry.example.com/nexo/proxy:latest"}
`, "\n", "\r\n")
	out, _, code := run(t, list, "preflight", "-f", "-", "-o", "json")
	var fromStdin preflight.Report
	if err := json.Unmarshal([]byte(out), &fromStdin); err != nil || code != 1 {
		t.Fatalf("preflight -f - (a CRLF List): exit %d, %v\n%s", code, err, out)
	}
	if images := findCheck(t, fromStdin, "images-pinned"); len(images.Details) != 3 || !strings.Contains(strings.Join(images.Details, ","), "nexo/proxy:latest") {
		t.Errorf("a NexoProxy's spec.proxyImage on :latest is not reported: %+v", images)
	}

	out, _, code = run(t, "", "preflight", "-f", dir, "-o", "json")
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	var r preflight.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("-o json is not one JSON document: %v\n%s", err, out)
	}
	refs := findCheck(t, r, "pipeline-references")
	if refs.Status != preflight.Error || len(refs.Details) != 1 || !strings.Contains(refs.Details[0], "NexoPipeline shop/guarded request[1]: NexoQueryGuard") {
		t.Errorf("reference check: %+v", refs)
	}
	images := findCheck(t, r, "images-pinned")
	if images.Status != preflight.Warning || len(images.Details) != 2 || images.Hint == "" {
		t.Errorf("image check: %+v", images)
	}
	if r.Status != preflight.Error || r.Errors != 1 {
		t.Errorf("summary %s with %d errors", r.Status, r.Errors)
	}
}

func TestUsageErrorsExitTwo(t *testing.T) {
	if _, errOut, code := run(t, "", "preflight", "-f", samplesDir(), "-o", "xml"); code != 2 || !strings.Contains(errOut, "unknown output format") {
		t.Errorf("bad -o: exit %d, %q", code, errOut)
	}
	if _, _, code := run(t, "", "preflight", "-f", "/does/not/exist"); code != 2 {
		t.Errorf("missing folder: exit %d, want 2", code)
	}
	if _, _, code := run(t, "", "preflight", "--kubeconfig", "/does/not/exist"); code != 2 {
		t.Errorf("missing kubeconfig: exit %d, want 2", code)
	}
	// An unreachable cluster exits 2 in every verb.
	unreachable := filepath.Join(t.TempDir(), "kubeconfig")
	_ = os.WriteFile(unreachable, []byte("apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\ncontexts: [{name: c, context: {cluster: c, user: u}}]\nusers: [{name: u, user: {token: x}}]\ncurrent-context: c\n"), 0o600)
	for _, verb := range [][]string{{"preflight"}, {"status", "-A"}, {"version"}} {
		if _, errOut, code := run(t, "", append([]string{"--kubeconfig", unreachable}, verb...)...); code != 2 {
			t.Errorf("%s against an unreachable cluster: exit %d, want 2 (%s)", verb[0], code, errOut)
		}
	}
	if _, _, code := run(t, "", "no-such-verb"); code != 2 {
		t.Errorf("unknown verb: exit %d, want 2", code)
	}
}

func TestSignAndVerify(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	dir := t.TempDir()
	keyFile, pubFile := filepath.Join(dir, "cp.key"), filepath.Join(dir, "cp.pub")
	_ = os.WriteFile(keyFile, signature.MarshalPrivateKey(priv), 0o600)
	_ = os.WriteFile(pubFile, signature.MarshalPublicKey(pub), 0o644)
	manifest := "apiVersion: nexo.io/v1alpha1\nkind: NexoRateLimit\nmetadata: {name: rl, namespace: shop}\nspec: {operationsPerSecond: 5}\n"

	signed, errOut, code := run(t, manifest, "sign", "--key-file", keyFile, "--environment", "env0a1b2c3", "--revision", "3", "-f", "-")
	if code != 0 || !strings.Contains(signed, wire.SignatureAnnotation) {
		t.Fatalf("sign: exit %d %s\n%s", code, errOut, signed)
	}
	signedFile := filepath.Join(dir, "signed.yaml")
	_ = os.WriteFile(signedFile, []byte(signed), 0o644)
	if out, _, code := run(t, "", "verify", "--public-key-file", pubFile, "--environment", "env0a1b2c3", "-f", signedFile); code != 0 || !strings.HasPrefix(out, "✔") || !strings.Contains(out, "revision 3") {
		t.Errorf("verify signed: exit %d %s", code, out)
	}
	// Signed for one environment, refused by another.
	if out, _, code := run(t, "", "verify", "--public-key-file", pubFile, "--environment", "otherenv99", "-f", signedFile); code != 1 || !strings.Contains(out, "another environment") {
		t.Errorf("verify for another environment: exit %d %s", code, out)
	}
	tampered := strings.Replace(signed, "operationsPerSecond: 5", "operationsPerSecond: 500", 1)
	out, _, code := run(t, tampered, "verify", "--public-key-file", pubFile, "--environment", "env0a1b2c3", "-f", "-", "-o", "json")
	var res struct{ Failed int }
	if code != 1 || json.Unmarshal([]byte(out), &res) != nil || res.Failed != 1 {
		t.Errorf("verify tampered: exit %d %s", code, out)
	}
	if _, errOut, code := run(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, namespace: y}\n", "sign", "--key-file", keyFile, "--environment", "env0a1b2c3", "--revision", "1", "-f", "-"); code != 2 || !strings.Contains(errOut, "not a nexo.io object") {
		t.Errorf("sign a ConfigMap: exit %d %q", code, errOut)
	}
}

// TestClusterPreflight runs against a real API server with the CRDs installed, then breaks it
// the ways preflight must catch: a modified CRD, a missing CRD, a pipeline referencing a
// schema-only kind.
func TestClusterPreflight(t *testing.T) {
	ctx := context.Background()
	c, k8s := clusterWithCRDs(t)
	report := func() preflight.Report {
		out, errOut, _ := run(t, "", "--kubeconfig", c.Kubeconfig, "preflight", "-o", "json")
		var r preflight.Report
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("%v: %s %s", err, out, errOut)
		}
		return r
	}
	r := report()
	// No Manager and no connect token: installed with manager.enabled=false, not an error.
	for _, id := range []string{"manager-available", "manager-configured", "connect-token", "manager-heartbeat", "manager-deploy-limit"} {
		if res := findCheck(t, r, id); res.Status != preflight.OK || !strings.Contains(res.Message, "manager.enabled=false") {
			t.Errorf("%s without a Manager: %+v", id, res)
		}
	}
	// The operator is missing too: that one fails, with a runnable hint and its docs section.
	if res := findCheck(t, r, "operator-available"); res.Status != preflight.Error || strings.Contains(res.Hint, "<") ||
		!strings.Contains(res.Hint, "kubectl -n nexo-system describe deployment nexo-operator") || !strings.HasSuffix(res.Docs, "troubleshooting.md#operator-available") {
		t.Errorf("operator-available: %+v", res)
	}
	for _, desc := range []string{"api-reachable", "api-version", "crds-installed", "crds-version", "crds-keep-policy", "crds-fingerprint"} {
		if res := findCheck(t, r, desc); res.Status != preflight.OK {
			t.Errorf("%s: %+v", desc, res)
		}
	}

	// A Deployment scaled to zero is not available.
	zero := int32(0)
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "nexo-system"}}); err != nil {
		t.Fatal(err)
	}
	op := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "nexo-operator", Namespace: "nexo-system", Labels: map[string]string{"app.kubernetes.io/name": "nexo-operator"}},
		Spec: appsv1.DeploymentSpec{Replicas: &zero, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "op"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "op"}}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "operator", Image: "ghcr.io/nexo-io/nexo-operator:0.2.0"}}}}}}
	if err := k8s.Create(ctx, op); err != nil {
		t.Fatal(err)
	}
	if res := findCheck(t, report(), "operator-available"); res.Status != preflight.Error || !strings.Contains(res.Message, "scaled to 0 replicas") {
		t.Errorf("an operator scaled to 0: %+v", res)
	}
	if err := k8s.Delete(ctx, op); err != nil {
		t.Fatal(err)
	}

	// A Manager whose cluster limit is empty may deploy nowhere: a warning that says so and how
	// to set it; with namespaces and repositories, it says which.
	mgr := op.DeepCopy()
	mgr.ObjectMeta = metav1.ObjectMeta{Name: "nexo-manager", Namespace: "nexo-system", Labels: map[string]string{"app.kubernetes.io/name": "nexo-manager"}}
	status := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: wire.ManagerStatusConfigMap, Namespace: "nexo-system"},
		Data: map[string]string{wire.StatusDeployNamespaces: "", wire.StatusImageRepositories: ""}}
	for _, o := range []client.Object{mgr, status} {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	if res := findCheck(t, report(), "manager-deploy-limit"); res.Status != preflight.Warning || !strings.Contains(res.Message, "may deploy nowhere") ||
		!strings.Contains(res.Hint, "--set manager.deployNamespaces=") || !strings.HasSuffix(res.Docs, "troubleshooting.md#manager-deploy-limit") {
		t.Errorf("an empty deploy limit: %+v", res)
	}
	status.Data = map[string]string{wire.StatusDeployNamespaces: "shop", wire.StatusImageRepositories: "registry.example.com/nexo/proxy"}
	if err := k8s.Update(ctx, status); err != nil {
		t.Fatal(err)
	}
	if res := findCheck(t, report(), "manager-deploy-limit"); res.Status != preflight.OK || res.Message != "deploys into shop; images from registry.example.com/nexo/proxy" {
		t.Errorf("a deploy limit: %+v", res)
	}
	// A Manager that is not configured: manager-configured fails with what it reports missing
	// and the one command that adds it; manager-heartbeat points there instead of at the network.
	status.Data[wire.StatusConfigured] = "false"
	status.Data[wire.StatusNotConfigured] = "missing the Control Plane URL: create the ConfigMap nexo-manager-config in namespace nexo-system with the key controlPlaneURL"
	if err := k8s.Update(ctx, status); err != nil {
		t.Fatal(err)
	}
	r = report()
	if res := findCheck(t, r, "manager-configured"); res.Status != preflight.Error || !strings.Contains(res.Message, "not configured: missing the Control Plane URL: create the ConfigMap nexo-manager-config") ||
		!strings.Contains(res.Hint, "--control-plane-url") || !strings.HasSuffix(res.Docs, "troubleshooting.md#manager-configured") {
		t.Errorf("an unconfigured Manager: %+v", res)
	}
	if res := findCheck(t, r, "manager-heartbeat"); res.Status != preflight.Warning || !strings.Contains(res.Message, "not configured") {
		t.Errorf("the heartbeat of an unconfigured Manager: %+v", res)
	}
	status.Data[wire.StatusConfigured], status.Data[wire.StatusNotConfigured] = "true", ""
	// The heartbeat's age, in the intervals the Control Plane asked for: fresh is OK, past 3
	// intervals a warning, past 10 (the Control Plane's lost threshold) an error naming the age.
	for _, c := range []struct {
		age    time.Duration
		want   preflight.Status
		saying string
	}{
		{20 * time.Second, preflight.OK, "last heartbeat 2"},
		{2 * time.Minute, preflight.Warning, "more than 3 heartbeat intervals (30s): stale"},
		{6 * time.Minute, preflight.Error, "more than 10 heartbeat intervals (30s): the Control Plane counts this environment as lost"},
	} {
		status.Data[wire.StatusLastHeartbeatTime] = time.Now().Add(-c.age).UTC().Format(time.RFC3339)
		status.Data[wire.StatusHeartbeatInterval], status.Data[wire.StatusControlPlaneReachable] = "30", "true"
		if err := k8s.Update(ctx, status); err != nil {
			t.Fatal(err)
		}
		r := report()
		if res := findCheck(t, r, "manager-configured"); res.Status != preflight.OK {
			t.Errorf("a configured Manager: %+v", res)
		}
		if res := findCheck(t, r, "manager-heartbeat"); res.Status != c.want || !strings.Contains(res.Message, c.saying) {
			t.Errorf("a heartbeat %s old: %+v, want %s saying %q", c.age, res, c.want, c.saying)
		}
	}
	// Its admission binding holding it to another limit (an OLM config.env changed, the old
	// binding kept): a warning naming both and the binding; once they agree, OK again.
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "nexo-manager-deploy-limit-nexo-system",
		Annotations: map[string]string{"nexo.io/admission-manager": "system:serviceaccount:nexo-system:nexo-manager",
			"nexo.io/admission-deploy-namespaces": "shop,payments", "nexo.io/admission-image-repositories": "registry.example.com/nexo/proxy"}},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "nexo-manager-deploy-limit",
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}}}
	if err := k8s.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
	if res := findCheck(t, report(), "manager-deploy-limit"); res.Status != preflight.Warning || !strings.Contains(res.Message, "nexo-manager-deploy-limit-nexo-system") ||
		!strings.Contains(res.Message, `"shop,payments"`) || !strings.Contains(res.Message, "delete the binding") {
		t.Errorf("a Manager and its admission binding disagreeing: %+v", res)
	}
	binding.Annotations["nexo.io/admission-deploy-namespaces"] = " shop "
	if err := k8s.Update(ctx, binding); err != nil {
		t.Fatal(err)
	}
	if res := findCheck(t, report(), "manager-deploy-limit"); res.Status != preflight.OK {
		t.Errorf("a Manager and its admission binding agreeing: %+v", res)
	}
	if err := k8s.Delete(ctx, binding); err != nil {
		t.Fatal(err)
	}
	for _, o := range []client.Object{mgr, status} {
		if err := k8s.Delete(ctx, o); err != nil {
			t.Fatal(err)
		}
	}

	// The pre-install checks as another identity (kubectl's --as): a user without rights is told
	// what is missing.
	out, _, code := run(t, "", "--kubeconfig", c.Kubeconfig, "preflight", "--pre", "--as", "nobody", "-o", "json")
	var pre preflight.Report
	if err := json.Unmarshal([]byte(out), &pre); err != nil || code != 1 {
		t.Fatalf("preflight --pre --as nobody: exit %d, %v\n%s", code, err, out)
	}
	if res := findCheck(t, pre, "install-permissions"); res.Status != preflight.Error || !strings.Contains(strings.Join(res.Details, " "), "customresourcedefinitions") {
		t.Errorf("install-permissions as nobody: %+v", res)
	}
	if _, _, code := run(t, "", "--kubeconfig", c.Kubeconfig, "preflight", "--pre"); code != 0 {
		t.Errorf("preflight --pre as the admin: exit %d", code)
	}

	// A pipeline referencing a schema-only kind.
	pipe := &unstructured.Unstructured{}
	_ = yaml.Unmarshal([]byte("apiVersion: nexo.io/v1alpha1\nkind: NexoPipeline\nmetadata: {name: guarded, namespace: default}\nspec:\n  request:\n  - {kind: NexoQueryGuard, name: q}\n"), &pipe.Object)
	if err := k8s.Create(ctx, pipe); err != nil {
		t.Fatal(err)
	}
	// A modified CRD.
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := k8s.Get(ctx, client.ObjectKey{Name: "nexoratelimits.nexo.io"}, crd); err != nil {
		t.Fatal(err)
	}
	crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Description = "edited by hand"
	if err := k8s.Update(ctx, crd); err != nil {
		t.Fatal(err)
	}
	r = report()
	if res := findCheck(t, r, "pipeline-references"); res.Status != preflight.Error || !strings.Contains(strings.Join(res.Details, "\n"), "NexoPipeline default/guarded request[0]: NexoQueryGuard") {
		t.Errorf("pipeline check: %+v", res)
	}
	if res := findCheck(t, r, "crds-fingerprint"); res.Status != preflight.Error || strings.Join(res.Details, ",") != "NexoRateLimit: schema differs" {
		t.Errorf("fingerprint check: %+v", res)
	}

	// A missing CRD stops the later categories (fatal).
	if err := k8s.Get(ctx, client.ObjectKey{Name: "nexotracings.nexo.io"}, crd); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Delete(ctx, crd); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return k8s.Get(ctx, client.ObjectKey{Name: "nexotracings.nexo.io"}, crd) != nil, nil
	}); err != nil {
		t.Fatal("CRD not deleted")
	}
	r = report()
	if res := findCheck(t, r, "crds-installed"); res.Status != preflight.Error || !strings.Contains(strings.Join(res.Details, ","), "nexotracings.nexo.io") {
		t.Errorf("missing CRD: %+v", res)
	}
	if res := findCheck(t, r, "operator-available"); res.Status != preflight.Skipped {
		t.Errorf("checks after a fatal failure should be skipped: %+v", res)
	}
	if _, _, code := run(t, "", "--kubeconfig", c.Kubeconfig, "preflight"); code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
}
