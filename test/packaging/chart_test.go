package packaging_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/cli"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/catalog"
	"github.com/nexo-io/nexo-edge/config/admission"
	"github.com/nexo-io/nexo-edge/contract/manifest"
	"github.com/nexo-io/nexo-edge/contract/scheme"
	"github.com/nexo-io/nexo-edge/contract/wire"
	"github.com/nexo-io/nexo-edge/test/framework/testcluster"
	"github.com/nexo-io/nexo-edge/test/framework/testinstall"
)

var chartDir = filepath.Join(testcluster.RepoRoot(), "charts", "nexo-edge")

func helmCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	bin := filepath.Join(testcluster.RepoRoot(), "bin", "helm")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("bin/helm missing: run make cluster-tools (%v)", err)
	}
	out, err := exec.Command(bin, args...).CombinedOutput()
	return string(out), err
}

func TestChartLintAndTemplate(t *testing.T) {
	if out, err := helmCLI(t, "lint", "--strict", chartDir, "--set", "manager.controlPlaneURL=https://cp.example.invalid"); err != nil {
		t.Fatalf("helm lint --strict: %v\n%s", err, out)
	}
	// No Control Plane URL has a default: rendering without one says what to set.
	if out, err := helmCLI(t, "template", "nexo-edge", chartDir, "--kube-version", "1.37.0"); err == nil || !strings.Contains(out, "manager.controlPlaneURL is required") {
		t.Errorf("template without manager.controlPlaneURL: %v\n%s", err, out)
	}
	out, err := helmCLI(t, "template", "nexo-edge", chartDir, "-n", "nexo-system", "--kube-version", "1.37.0", "--set", "manager.controlPlaneURL=https://cp.example.invalid")
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	// The Manager reports the proxy image released with the chart unless the install sets another.
	if !strings.Contains(out, "--proxy-image="+catalog.DefaultProxyImage) {
		t.Errorf("the chart's Manager is not configured with the released proxy image %s", catalog.DefaultProxyImage)
	}
	if n := strings.Count(out, "\nkind: CustomResourceDefinition"); n != len(catalog.Kinds) {
		t.Errorf("template renders %d CRDs, want %d", n, len(catalog.Kinds))
	}
	// Kept on uninstall: every CRD, the trusted-keys Secret, and the four admission objects every
	// installation of the cluster shares (three policies, the no-token binding).
	if n := strings.Count(out, "helm.sh/resource-policy: keep"); n != len(catalog.Kinds)+5 {
		t.Errorf("%d objects carry the keep policy, want every CRD (%d), the trusted-keys Secret and the 4 shared admission objects", n, len(catalog.Kinds))
	}
	out, err = helmCLI(t, "template", "nexo-edge", chartDir, "--kube-version", "1.37.0", "--set", "crds.install=false", "--set", "manager.controlPlaneURL=https://cp.example.invalid")
	if err != nil || strings.Contains(out, "kind: CustomResourceDefinition") {
		t.Errorf("crds.install=false still renders CRDs (%v)", err)
	}
	// A digest wins over the tag.
	out, err = helmCLI(t, "template", "nexo-edge", chartDir, "--kube-version", "1.37.0", "--set", "manager.controlPlaneURL=https://cp.example.invalid",
		"--set", "operator.image.digest=sha256:"+strings.Repeat("a", 64))
	if err != nil || !strings.Contains(out, "ghcr.io/nexo-io/nexo-operator@sha256:"+strings.Repeat("a", 64)) {
		t.Errorf("digest did not replace the tag (%v)", err)
	}
}

func TestChartSchemaRejectsBadValues(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("operator:\n  image:\n    repository: x\n    tag: \"bad tag\"\n  replicas: 0\n  logLevel: loud\nbogus: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := helmCLI(t, "template", "nexo-edge", chartDir, "-f", bad, "--kube-version", "1.37.0")
	if err == nil {
		t.Fatal("the schema accepted a bad values file")
	}
	for _, want := range []string{"/operator/image/tag", "/operator/replicas", "/operator/logLevel", "additional properties 'bogus' not allowed"} {
		if !strings.Contains(out, want) {
			t.Errorf("schema error does not mention %q:\n%s", want, out)
		}
	}
}

// TestChartInstallsIntoRestrictedNamespace installs the chart with the Helm SDK onto the full
// cluster, into a namespace that enforces the restricted Pod Security Standard, and waits for
// both Deployments: their pods exist only if admission accepted them. Uninstalling keeps the CRDs.
func TestChartInstallsIntoRestrictedNamespace(t *testing.T) {
	ctx := context.Background()
	c, err := testcluster.Start(ctx, testcluster.Options{Mode: testcluster.Full})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	scheme := scheme.New()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	k8s, err := client.New(c.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ns := "nexo-helm"
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest",
	}}}); err != nil {
		t.Fatal(err)
	}
	settings := cli.New()
	settings.KubeConfig = c.Kubeconfig
	cfg := new(action.Configuration)
	if err := cfg.Init(settings.RESTClientGetter(), ns, "secret", func(string, ...any) {}); err != nil {
		t.Fatal(err)
	}
	chart, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	install := action.NewInstall(cfg)
	install.ReleaseName, install.Namespace, install.Wait, install.Timeout = "nexo-edge", ns, true, 3*time.Minute
	rel, err := install.Run(chart, map[string]any{"manager": map[string]any{"controlPlaneURL": "https://cp.example.invalid"}})
	if err != nil {
		t.Fatalf("helm install: %v\n%s", err, c.LogTail("kube-controller-manager", 20))
	}
	for _, name := range []string{"nexo-operator", "nexo-manager"} {
		pods := &corev1.PodList{}
		if err := k8s.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/name": name}); err != nil || len(pods.Items) == 0 {
			t.Errorf("no %s pods admitted in the restricted namespace (%v)", name, err)
		}
	}
	if strings.Contains(rel.Manifest, "nexo-connect-token\n  data") {
		t.Error("the release record contains the connect-token Secret")
	}

	uninstall := action.NewUninstall(cfg)
	if _, err := uninstall.Run("nexo-edge"); err != nil {
		t.Fatal(err)
	}
	crds := &apiextensionsv1.CustomResourceDefinitionList{}
	if err := k8s.List(ctx, crds, client.HasLabels{catalog.SupportLabel}); err != nil || len(crds.Items) != len(catalog.Kinds) {
		t.Errorf("after uninstall %d nexo CRDs remain, want all %d (%v)", len(crds.Items), len(catalog.Kinds), err)
	}
}

// TestKustomizeDefaultAppliesServerSide builds config/default with the kustomize library and
// applies every object server-side in dry-run mode against a real API server.
func TestKustomizeDefaultAppliesServerSide(t *testing.T) {
	ctx := context.Background()
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), filepath.Join(testcluster.RepoRoot(), "config", "default"))
	if err != nil {
		t.Fatalf("kustomize build config/default: %v", err)
	}
	c, err := testcluster.Start(ctx, testcluster.Options{Mode: testcluster.Envtest})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Stop()
	k8s, err := client.New(c.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var objs, pristine []*unstructured.Unstructured
	for _, r := range res.Resources() {
		m, err := r.Map()
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{Object: m}
		objs = append(objs, u)
		fresh, _ := r.Map() // the dry runs below fill objs in (and kustomize's maps hold ints, which DeepCopy refuses)
		pristine = append(pristine, &unstructured.Unstructured{Object: fresh})
		if u.GetKind() == "Namespace" { // namespaced objects need it to exist, even in dry-run
			if err := k8s.Create(ctx, u.DeepCopy()); err != nil {
				t.Fatal(err)
			}
		}
	}
	kinds := map[string]int{}
	for _, u := range objs {
		kinds[u.GetKind()]++
		if err := k8s.Patch(ctx, u, client.Apply, client.FieldOwner("nexo-test"), client.DryRunAll, client.ForceOwnership); err != nil {
			t.Errorf("server-side dry-run apply of %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
	// The Manager deploys nowhere until the cluster admin says where: its limit is empty in the
	// ConfigMap and the admission binding, and nothing binds its write role.
	for _, u := range pristine {
		switch {
		case u.GetKind() == "ConfigMap" && u.GetName() == "nexo-manager-limits":
			if v, _, _ := unstructured.NestedString(u.Object, "data", "deployNamespaces"); v != "" {
				t.Errorf("config/default's deploy limit is %q, want empty", v)
			}
		case u.GetKind() == "ValidatingAdmissionPolicyBinding" && u.GetName() == admission.DeployLimitPolicy:
			if v, ok := u.GetAnnotations()[admission.DeployNamespacesAnnotation]; !ok || v != "" {
				t.Errorf("config/default's deploy-limit binding has namespaces %q (set %v), want empty", v, ok)
			}
		case strings.HasSuffix(u.GetKind(), "RoleBinding"):
			if ref, _, _ := unstructured.NestedString(u.Object, "roleRef", "name"); ref == "nexo-manager-deploy" {
				t.Errorf("config/default binds the Manager's write role: %s %s", u.GetKind(), u.GetName())
			}
		}
	}
	if kinds["CustomResourceDefinition"] != len(catalog.Kinds) || kinds["Deployment"] != 2 {
		t.Errorf("config/default has %v", kinds)
	}
	t.Logf("kustomize build config/default: %s", fmt.Sprint(kinds))

	// The admission policies as kustomize ships them work: applied for real, an unmanaged Nexo
	// object is admitted (the binding finds its parameters) and a managed one written by anyone but
	// the Manager, a cluster admin included, is refused.
	for _, u := range pristine {
		switch u.GetKind() {
		case "CustomResourceDefinition", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
			if err := k8s.Patch(ctx, u, client.Apply, client.FieldOwner("nexo-test"), client.ForceOwnership); err != nil {
				t.Fatalf("apply %s %s: %v", u.GetKind(), u.GetName(), err)
			}
		}
	}
	if err := testinstall.WaitCRDsServed(ctx, c.Config, len(catalog.Kinds), time.Minute); err != nil {
		t.Fatal(err)
	}
	nexo, err := client.New(c.Config, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	rl := func(name string, managed bool) *nexov1alpha1.NexoRateLimit {
		o := &nexov1alpha1.NexoRateLimit{ObjectMeta: metav1.ObjectMeta{Namespace: "nexo-system", Name: name},
			Spec: nexov1alpha1.NexoRateLimitSpec{OperationsPerSecond: 5, Burst: 10}}
		if managed {
			o.Labels = map[string]string{wire.ManagedByLabel: "control-plane"}
		}
		return o
	}
	var err2 error
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		o := rl("forged", true)
		err2 = nexo.Create(ctx, o)
		if err2 == nil {
			_ = nexo.Delete(ctx, o)
		}
		return err2 != nil && strings.Contains(err2.Error(), "only the Nexo Manager"), nil
	}); err != nil {
		t.Fatalf("kustomize's admission policy never refused a managed object from an admin: %v", err2)
	}
	if err := nexo.Create(ctx, rl("plain", false)); err != nil {
		t.Errorf("an unmanaged object under kustomize's admission policy: %v", err)
	}
}

// TestKustomizeNamespacedGrantsOnlyRoleBindings builds config/namespaced: the operator watches
// one namespace, is bound there by RoleBindings, and has no ClusterRoleBinding; nothing binds a
// Secret write cluster-wide. The admission policy is included.
func TestKustomizeNamespacedGrantsOnlyRoleBindings(t *testing.T) {
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), filepath.Join(testcluster.RepoRoot(), "config", "namespaced"))
	if err != nil {
		t.Fatalf("kustomize build config/namespaced: %v", err)
	}
	var roleBindings []string
	policy := false
	var limit, limitBinding string
	for _, r := range res.Resources() {
		switch r.GetKind() {
		case "ConfigMap":
			if r.GetName() == "nexo-manager-limits" {
				m, _ := r.Map()
				limit, _, _ = unstructured.NestedString(m, "data", "deployNamespaces")
			}
		case "ValidatingAdmissionPolicyBinding":
			if r.GetName() == admission.DeployLimitPolicy {
				limitBinding = r.GetAnnotations()[admission.DeployNamespacesAnnotation]
			}
		case "ClusterRoleBinding":
			// The Manager's reads, and the metrics authentication (TokenReview and
			// SubjectAccessReview are cluster-scoped APIs that store nothing).
			if r.GetName() != "nexo-manager" && r.GetName() != "nexo-operator-metrics-auth" {
				t.Errorf("ClusterRoleBinding %s in a namespaced install", r.GetName())
			}
		case "RoleBinding":
			roleBindings = append(roleBindings, r.GetNamespace()+"/"+r.GetName())
		case "ValidatingAdmissionPolicy":
			policy = true
		case "Deployment":
			if r.GetName() == "nexo-operator" {
				m, _ := r.Map()
				raw, _ := yaml.Marshal(m)
				if !strings.Contains(string(raw), "--watch-namespaces=nexo-proxies") {
					t.Errorf("operator Deployment does not watch nexo-proxies:\n%s", raw)
				}
			}
		}
	}
	// The Manager's deploy limit is nexo-proxies in all three places: what it reads, its write
	// RoleBinding (and no other), and its admission binding.
	if limit != "nexo-proxies" || limitBinding != "nexo-proxies" {
		t.Errorf("the Manager's deploy limit: ConfigMap %q, admission binding %q; want nexo-proxies in both", limit, limitBinding)
	}
	for _, rb := range roleBindings {
		if strings.HasSuffix(rb, "/nexo-manager-deploy") && rb != "nexo-proxies/nexo-manager-deploy" {
			t.Errorf("the Manager may write in %s, outside its deploy limit", rb)
		}
	}
	for _, want := range []string{"nexo-proxies/nexo-operator", "nexo-proxies/nexo-operator-secret-copies", "nexo-system/nexo-operator", "nexo-proxies/nexo-manager-deploy"} {
		if !slices.Contains(roleBindings, want) {
			t.Errorf("RoleBinding %s missing (have %v)", want, roleBindings)
		}
	}
	if !policy {
		t.Error("the admission policy is not part of the kustomize install")
	}
}

// TestChartAsCertManagerUsersExpectIt renders the chart with every user-facing knob set, the
// way the Helm CLI does, and checks what each must produce.
func TestChartAsCertManagerUsersExpectIt(t *testing.T) {
	values := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(values, []byte(`
global: {imageRegistry: mirror.example.com}
commonLabels: {team: edge}
imagePullSecrets: [{name: regcred}, legacy-name]
manager:
  controlPlaneURL: https://cp.example.invalid
  priorityClassName: system-cluster-critical
  extraArgs: ["--log-heartbeats"]
  extraEnv: [{name: HTTPS_PROXY, value: "http://proxy.example:3128"}]
  serviceAccount: {annotations: {iam.example.com/role: nexo-manager}}
operator:
  replicas: 2
  affinity: {podAntiAffinity: {preferredDuringSchedulingIgnoredDuringExecution: [{weight: 1, podAffinityTerm: {topologyKey: kubernetes.io/hostname, labelSelector: {matchLabels: {app.kubernetes.io/name: nexo-operator}}}}]}}
  topologySpreadConstraints: [{maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: ScheduleAnyway, labelSelector: {matchLabels: {app.kubernetes.io/name: nexo-operator}}}]
  podLabels: {sidecar.example.com/inject: "false"}
  podAnnotations: {example.com/scrape: "true"}
  podDisruptionBudget: {enabled: true}
networkPolicy: {enabled: true}
metrics: {serviceMonitor: {enabled: true, tokenSecret: {name: prometheus-token}}}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := helmCLI(t, "template", "nexo-edge", chartDir, "-n", "nexo-system", "--kube-version", "1.37.0", "-f", values)
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	objs, err := manifest.Read(strings.NewReader(out), "helm template")
	if err != nil {
		t.Fatal(err)
	}
	find := func(kind, name string) *unstructured.Unstructured {
		for _, o := range objs {
			if o.GetKind() == kind && o.GetName() == name {
				return o
			}
		}
		t.Fatalf("no %s %s rendered", kind, name)
		return nil
	}
	for _, o := range objs {
		l := o.GetLabels()
		for _, k := range []string{"app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/managed-by", "app.kubernetes.io/part-of", "app.kubernetes.io/version"} {
			if l[k] == "" {
				t.Errorf("%s %s has no %s label", o.GetKind(), o.GetName(), k)
			}
		}
		if l["team"] != "edge" {
			t.Errorf("%s %s lacks commonLabels", o.GetKind(), o.GetName())
		}
	}
	op := find("Deployment", "nexo-operator")
	pod, _, _ := unstructured.NestedMap(op.Object, "spec", "template", "spec")
	if pod["affinity"] == nil || pod["topologySpreadConstraints"] == nil {
		t.Errorf("operator pod spec without affinity or topology spread: %v", pod)
	}
	if secrets := fmt.Sprint(pod["imagePullSecrets"]); !strings.Contains(secrets, "name:regcred") || !strings.Contains(secrets, "name:legacy-name") {
		t.Errorf("imagePullSecrets %s", secrets)
	}
	if l, _, _ := unstructured.NestedStringMap(op.Object, "spec", "template", "metadata", "labels"); l["sidecar.example.com/inject"] != "false" {
		t.Errorf("podLabels missing: %v", l)
	}
	if a, _, _ := unstructured.NestedStringMap(op.Object, "spec", "template", "metadata", "annotations"); a["example.com/scrape"] != "true" {
		t.Errorf("podAnnotations missing: %v", a)
	}
	mgr := find("Deployment", "nexo-manager")
	mpod, _, _ := unstructured.NestedMap(mgr.Object, "spec", "template", "spec")
	if mpod["priorityClassName"] != "system-cluster-critical" {
		t.Errorf("manager priorityClassName %v", mpod["priorityClassName"])
	}
	c := fmt.Sprint(mpod["containers"])
	if !strings.Contains(c, "--log-heartbeats") || !strings.Contains(c, "HTTPS_PROXY") {
		t.Errorf("manager extraArgs/extraEnv missing: %s", c)
	}
	if a := find("ServiceAccount", "nexo-manager").GetAnnotations(); a["iam.example.com/role"] != "nexo-manager" {
		t.Errorf("ServiceAccount annotations %v", a)
	}
	find("PodDisruptionBudget", "nexo-operator")
	if types, _, _ := unstructured.NestedStringSlice(find("NetworkPolicy", "nexo-edge").Object, "spec", "policyTypes"); !slices.Contains(types, "Egress") {
		t.Errorf("the NetworkPolicy does not restrict egress: %v", types)
	}

	// Two operators without leader election would both write: a template error says so.
	if out, err := helmCLI(t, "template", "nexo-edge", chartDir, "--set", "manager.controlPlaneURL=https://cp.example.invalid",
		"--set", "operator.replicas=2", "--set", "operator.leaderElect=false", "--kube-version", "1.37.0"); err == nil || !strings.Contains(out, "operator.replicas > 1 needs operator.leaderElect=true") {
		t.Errorf("replicas=2 without leader election: %v\n%s", err, out)
	}
}
