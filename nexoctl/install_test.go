package nexoctl_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/cli"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nexo-io/nexo-edge/catalog"
	"github.com/nexo-io/nexo-edge/charts"
	"github.com/nexo-io/nexo-edge/contract/connecttoken"
	"github.com/nexo-io/nexo-edge/contract/wire"
	"github.com/nexo-io/nexo-edge/test/framework/testcluster"
)

// releaseRecords returns the decoded content of every Helm release Secret in ns.
func releaseRecords(t *testing.T, k8s client.Client, ns string) []string {
	t.Helper()
	var list corev1.SecretList
	if err := k8s.List(context.Background(), &list, client.InNamespace(ns), client.MatchingLabels{"owner": "helm"}); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range list.Items {
		gz, err := base64.StdEncoding.DecodeString(string(s.Data["release"]))
		if err != nil {
			t.Fatal(err)
		}
		zr, err := gzip.NewReader(bytes.NewReader(gz))
		if err != nil {
			t.Fatal(err)
		}
		raw, _ := io.ReadAll(zr)
		out = append(out, string(raw))
	}
	return out
}

func TestInstall(t *testing.T) {
	ctx := context.Background()
	c, err := testcluster.Start(ctx, testcluster.Options{Mode: testcluster.Full})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	k8s := adminClient(t, c)
	kc := []string{"--kubeconfig", c.Kubeconfig}
	dir := t.TempDir()
	token, _ := connecttoken.New("envtest01")
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}

	// Bad token files: a precise error, exit 2, nothing in the cluster.
	for name, c := range map[string]struct{ file, want string }{
		"empty":            {write("empty", "", 0o600), "empty"},
		"trailing newline": {write("newline", token+"\n", 0o600), "trailing newline"},
		"wrong format":     {write("format", "hello-world", 0o600), "nxct_<environment id>_<secret>"},
		"unreadable":       {filepath.Join(dir, "missing"), "cannot read the token file"},
	} {
		out, errOut, code := run(t, "", append(kc, "install", "--token-file", c.file)...)
		if code != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%s: exit %d, stderr %q, want exit 2 mentioning %q", name, code, errOut, c.want)
		}
		if strings.Contains(out+errOut, token) {
			t.Errorf("%s: output contains the token", name)
		}
	}
	var nss corev1.NamespaceList
	_ = k8s.List(ctx, &nss)
	for _, ns := range nss.Items {
		if ns.Name == "nexo-system" {
			t.Fatal("a failed token validation created the namespace")
		}
	}

	good := write("token", token, 0o600)
	// The install command pins a version: a nexoctl of another one refuses, naming both, and
	// changes nothing.
	if _, errOut, code := run(t, "", append(kc, "install", "--version", "9.9.9", "--token-file", good, "--control-plane-url", "https://cp.example.invalid")...); code != 1 ||
		!strings.Contains(errOut, "installs Nexo Edge "+catalog.BuildVersion) || !strings.Contains(errOut, "asks for 9.9.9") || !strings.Contains(errOut, "nothing was changed") {
		t.Errorf("install --version 9.9.9: exit %d, stderr %q", code, errOut)
	}
	if err := k8s.Get(ctx, client.ObjectKey{Name: "nexo-system"}, &corev1.Namespace{}); err == nil {
		t.Fatal("an install refused for its version changed the cluster")
	}
	// No Control Plane URL: there is no default host; refused before anything changes.
	if _, errOut, code := run(t, "", append(kc, "install", "--token-file", good)...); code != 2 || !strings.Contains(errOut, "--control-plane-url") {
		t.Errorf("install without a Control Plane URL: exit %d, stderr %q", code, errOut)
	}
	if err := k8s.Get(ctx, client.ObjectKey{Name: "nexo-system"}, &corev1.Namespace{}); err == nil {
		t.Fatal("an install refused for its missing Control Plane URL changed the cluster")
	}
	out, errOut, code := run(t, "", append(kc, "install", "--token-file", good, "--dry-run", "--control-plane-url", "https://cp.example.invalid")...)
	if code != 0 || !strings.Contains(out, "kind: Deployment") || strings.Contains(out+errOut, token) {
		t.Fatalf("dry-run: exit %d, token shown=%v\n%s", code, strings.Contains(out+errOut, token), strings.ReplaceAll(errOut, token, "<token>"))
	}
	if err := k8s.Get(ctx, client.ObjectKey{Name: "nexo-system"}, &corev1.Namespace{}); err == nil {
		t.Fatal("--dry-run changed the cluster")
	}

	out, errOut, code = run(t, "", append(kc, "install", "--version", catalog.BuildVersion, "--token-file", good, "--control-plane-url", "https://cp.example.invalid", "--wait", "--timeout", "3m")...)
	if code != 0 || !strings.Contains(out, "installed") {
		t.Fatalf("install: exit %d\n%s\n%s", code, out, errOut)
	}
	// --wait showed each component until it was available (off a terminal: a line per change).
	for _, want := range []string{"Waiting for nexo-operator and nexo-manager in nexo-system (up to 3m0s): ✓ nexo-operator  1/1 available",
		"Waiting for nexo-operator and nexo-manager in nexo-system (up to 3m0s): ✓ nexo-manager  1/1 available"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("install --wait did not show %q:\n%s", want, errOut)
		}
	}
	sec := &corev1.Secret{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: "nexo-system", Name: wire.ConnectTokenSecret}, sec); err != nil || string(sec.Data["token"]) != token {
		t.Fatalf("token Secret: %v", err)
	}
	// The token Secret is written before the release (a first install with --wait waits for a
	// Manager that mounts it). resourceVersions are etcd revisions here, so they order writes.
	rel := &corev1.Secret{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: "nexo-system", Name: "sh.helm.release.v1.nexo-edge.v1"}, rel); err != nil {
		t.Fatal(err)
	}
	if tokRV, relRV := atoi(t, sec.ResourceVersion), atoi(t, rel.ResourceVersion); tokRV > relRV {
		t.Errorf("the token Secret (revision %d) was written after the Helm release (revision %d)", tokRV, relRV)
	}
	// The operator is configured for the token's environment.
	dep := &appsv1.Deployment{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: "nexo-system", Name: "nexo-operator"}, dep); err != nil {
		t.Fatal(err)
	}
	envID, _ := connecttoken.Parse(token)
	if args := strings.Join(dep.Spec.Template.Spec.Containers[0].Args, " "); !strings.Contains(args, "--environment-id="+envID) {
		t.Errorf("operator args %s lack --environment-id=%s", args, envID)
	}
	// Re-running upgrades, from a group-readable file read through stdin this time.
	loose := write("loose", token, 0o644)
	out2, errOut2, code := run(t, "", append(kc, "install", "--token-file", loose, "--control-plane-url", "https://cp.example.invalid", "-o", "json")...)
	if code != 0 || !strings.Contains(out2, `"action": "upgraded"`) || !strings.Contains(out2, `"secretAction": "unchanged"`) {
		t.Fatalf("second install: exit %d\n%s\n%s", code, out2, errOut2)
	}
	if !strings.Contains(errOut2, "readable by group or others") {
		t.Errorf("no warning for a group-readable token file: %q", errOut2)
	}
	out3, errOut3, code := run(t, token, append(kc, "install", "--token-file", "-", "--control-plane-url", "https://cp.example.invalid")...)
	if code != 0 {
		t.Fatalf("install from stdin: exit %d %s", code, errOut3)
	}
	// Only the token file, as a token rotation does: the values of the last install are kept.
	out4, errOut4, code := run(t, "", append(kc, "install", "--token-file", good)...)
	if code != 0 || !strings.Contains(out4, "upgraded") {
		t.Fatalf("re-install with only --token-file: exit %d\n%s\n%s", code, out4, errOut4)
	}
	mgr := &appsv1.Deployment{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: "nexo-system", Name: "nexo-manager"}, mgr); err != nil ||
		!slices.Contains(mgr.Spec.Template.Spec.Containers[0].Args, "--control-plane-url=https://cp.example.invalid") {
		t.Errorf("a re-install with only --token-file lost the Control Plane URL (%v)", err)
	}
	records := releaseRecords(t, k8s, "nexo-system")
	if len(records) != 4 {
		t.Errorf("%d release records, want 4 (install + 3 upgrades)", len(records))
	}
	for _, r := range records {
		if strings.Contains(r, token) || strings.Contains(r, base64.StdEncoding.EncodeToString([]byte(token))) {
			t.Fatal("a Helm release record contains the connect token")
		}
	}
	for _, o := range []string{out, errOut, out2, errOut2, out3, errOut3, out4, errOut4} {
		if strings.Contains(o, token) {
			t.Fatal("nexoctl printed the connect token")
		}
	}

	// A release of a newer chart is not downgraded unless forced.
	newer, err := charts.NexoEdge()
	if err != nil {
		t.Fatal(err)
	}
	newer.Metadata.Version = "9.9.9"
	if err := installChart(c, "newer", "nexo-newer", newer, map[string]any{"crds": map[string]any{"install": false}, "admissionPolicy": map[string]any{"enabled": false},
		"manager": map[string]any{"controlPlaneURL": "https://cp.example.invalid"}}); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := run(t, "", append(kc, "install", "-n", "nexo-newer", "--release", "newer", "--token-file", good)...); code != 1 || !strings.Contains(errOut, "runs chart 9.9.9: 9.9.9 is installed, newer than this build") || !strings.Contains(errOut, "a downgrade is refused") {
		t.Errorf("downgrade without --force: exit %d %s", code, errOut)
	}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: "nexo-newer", Name: wire.ConnectTokenSecret}, &corev1.Secret{}); err == nil {
		t.Error("a refused downgrade still wrote the token Secret")
	}
	if out, errOut, code := run(t, "", append(kc, "install", "-n", "nexo-newer", "--release", "newer", "--token-file", good, "--force")...); code != 0 || !strings.Contains(out, "upgraded") || !strings.Contains(out, "(release newer)") {
		t.Errorf("downgrade with --force: exit %d %s %s", code, out, errOut)
	}

	// Uninstall says what it removed and what it kept, and never claims a release that is not there.
	if out, _, code := run(t, "", append(kc, "uninstall", "--release", "no-such-release")...); code != 0 || !strings.Contains(out, "no release no-such-release in namespace nexo-system: nothing was removed") {
		t.Errorf("uninstall of a missing release: exit %d %s", code, out)
	}
	out, errOut, code = run(t, "", append(kc, "uninstall")...)
	if code != 0 || !strings.Contains(out, "release nexo-edge removed") || !strings.Contains(out, "kept: Secret nexo-system/nexo-connect-token") || !strings.Contains(out, "kept: the 24 nexo.io CRDs") {
		t.Fatalf("uninstall: exit %d %s %s", code, out, errOut)
	}
	var crds apiextensionsv1.CustomResourceDefinitionList
	if err := k8s.List(ctx, &crds, client.HasLabels{"nexo.io/support"}); err != nil || len(crds.Items) != 24 {
		t.Errorf("after uninstall %d CRDs remain, want 24 (%v)", len(crds.Items), err)
	}
	if _, _, code := run(t, "no\n", append(kc, "uninstall", "--delete-crds")...); code != 1 {
		t.Errorf("unconfirmed --delete-crds: exit %d, want 1", code)
	}
	_ = k8s.List(ctx, &crds, client.HasLabels{"nexo.io/support"})
	if len(crds.Items) != 24 {
		t.Error("CRDs deleted without confirmation")
	}
}

// TestInstallNextToOLM: when a nexo-operator CSV exists, install adds only the installation
// ConfigMap (the Control Plane URL and the environment id) and the Secrets; a URL the
// Subscription's config.env sets otherwise is refused, naming both, and nothing is changed.
func TestInstallNextToOLM(t *testing.T) {
	ctx := context.Background()
	c, err := testcluster.Start(ctx, testcluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	k8s := adminClient(t, c)
	// A stand-in for OLM's CSV CRD and an installed nexo-operator CSV.
	preserve := true
	csvCRD := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "clusterserviceversions.operators.coreos.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "operators.coreos.com", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "clusterserviceversions", Kind: "ClusterServiceVersion", ListKind: "ClusterServiceVersionList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1alpha1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: &preserve}}}},
		},
	}
	if err := k8s.Create(ctx, csvCRD); err != nil {
		t.Fatal(err)
	}
	subCRD := csvCRD.DeepCopy()
	subCRD.ObjectMeta = metav1.ObjectMeta{Name: "subscriptions.operators.coreos.com"}
	subCRD.Spec.Names =
		apiextensionsv1.CustomResourceDefinitionNames{Plural: "subscriptions", Kind: "Subscription", ListKind: "SubscriptionList"}
	if err := k8s.Create(ctx, subCRD); err != nil {
		t.Fatal(err)
	}
	var csv *unstructured.Unstructured
	for i := 0; i < 50; i++ { // the new CRD takes a moment to serve
		csv = &unstructured.Unstructured{Object: map[string]any{"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
			"metadata": map[string]any{"name": "nexo-operator.v0.2.0", "namespace": "default"}, "spec": map[string]any{}}}
		if err = k8s.Create(ctx, csv); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	token, _ := connecttoken.New("olmenv01")
	out, errOut, code := run(t, token, "--kubeconfig", c.Kubeconfig, "install", "--token-file", "-")
	if code != 0 || !strings.Contains(out, "installed through OLM") || !strings.Contains(out, "--control-plane-url URL") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	installConfig := func() map[string]string {
		cm := &corev1.ConfigMap{}
		_ = k8s.Get(ctx, client.ObjectKey{Namespace: "nexo-system", Name: wire.InstallConfigMap}, cm)
		return cm.Data
	}
	if got := installConfig(); got[wire.ConfigEnvironmentID] != "olmenv01" || got[wire.ConfigControlPlane] != "" {
		t.Errorf("without --control-plane-url the installation ConfigMap is %v, want only the token's environment", got)
	}
	out, errOut, code = run(t, token, "--kubeconfig", c.Kubeconfig, "install", "--token-file", "-", "--control-plane-url", "https://cp.example.com")
	if code != 0 || !strings.Contains(out, "ConfigMap nexo-system/nexo-manager-config updated") {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	if got := installConfig(); got[wire.ConfigEnvironmentID] != "olmenv01" || got[wire.ConfigControlPlane] != "https://cp.example.com" {
		t.Errorf("the installation ConfigMap is %v", got)
	}
	// The Subscription's config.env names another Control Plane: refused, naming both.
	sub := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
		"metadata": map[string]any{"name": "nexo-operator", "namespace": "nexo-system"},
		"spec":     map[string]any{"name": "nexo-operator", "config": map[string]any{"env": []any{map[string]any{"name": "NEXO_CONTROL_PLANE_URL", "value": "https://other.example.com"}}}}}}
	if err := k8s.Create(ctx, sub); err != nil {
		t.Fatal(err)
	}
	newToken, _ := connecttoken.New("olmenv01")
	out, errOut, code = run(t, newToken, "--kubeconfig", c.Kubeconfig, "install", "--token-file", "-", "--control-plane-url", "https://cp2.example.com")
	if code == 0 || !strings.Contains(errOut, "NEXO_CONTROL_PLANE_URL=https://other.example.com") || !strings.Contains(errOut, "https://cp2.example.com") ||
		!strings.Contains(errOut, "nothing was changed") {
		t.Errorf("a URL the Subscription sets otherwise: exit %d\n%s\n%s", code, out, errOut)
	}
	if got := installConfig(); got[wire.ConfigControlPlane] != "https://cp.example.com" {
		t.Errorf("the refused install changed the ConfigMap: %v", got)
	}
	if sec := (&corev1.Secret{}); k8s.Get(ctx, client.ObjectKey{Namespace: "nexo-system", Name: wire.ConnectTokenSecret}, sec) != nil || string(sec.Data["token"]) != token {
		t.Error("the refused install changed the token Secret")
	}
	if records := releaseRecords(t, k8s, "nexo-system"); len(records) != 0 {
		t.Errorf("a Helm release was installed next to OLM (%d records)", len(records))
	}
	sec := &corev1.Secret{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: "nexo-system", Name: wire.ConnectTokenSecret}, sec); err != nil || string(sec.Data["token"]) != token {
		t.Errorf("token Secret not installed: %v", err)
	}
}

// adminClient is a client for built-in kinds and CRDs on a test cluster.
func adminClient(t *testing.T, c *testcluster.Cluster) client.Client {
	t.Helper()
	s := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(s)
	_ = apiextensionsv1.AddToScheme(s)
	k8s, err := client.New(c.Config, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	return k8s
}

func atoi(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// installChart installs ch as release name in ns with the Helm SDK (a fixture: another tool's install).
func installChart(c *testcluster.Cluster, name, ns string, ch *chart.Chart, vals map[string]any) error {
	settings := cli.New()
	settings.KubeConfig = c.Kubeconfig
	settings.SetNamespace(ns)
	cfg := new(action.Configuration)
	if err := cfg.Init(settings.RESTClientGetter(), ns, "secret", func(string, ...any) {}); err != nil {
		return err
	}
	inst := action.NewInstall(cfg)
	inst.ReleaseName, inst.Namespace, inst.CreateNamespace = name, ns, true
	_, err := inst.Run(ch, vals)
	return err
}
