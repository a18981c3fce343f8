// Package upgrade_test upgrades a running installation of the last release (releases/0.2.0: its
// chart or its kustomize configuration, with the operator and the Manager built from its source
// commit) to the build under test, on the full cluster, as a platform team does: nexoctl
// preflight --upgrade first, then nexoctl install (Helm) or kubectl apply -k (kustomize), then
// the new operator and Manager from the upgraded Deployments (docs/upgrade.md).
package upgrade_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/cli"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/catalog"
	"github.com/nexo-io/nexo-edge/contract/buildinfo"
	"github.com/nexo-io/nexo-edge/contract/license"
	"github.com/nexo-io/nexo-edge/contract/scheme"
	"github.com/nexo-io/nexo-edge/contract/signature"
	"github.com/nexo-io/nexo-edge/contract/wire"
	"github.com/nexo-io/nexo-edge/controllers/render"
	"github.com/nexo-io/nexo-edge/controlplane"
	"github.com/nexo-io/nexo-edge/hack/releasebuild"
	"github.com/nexo-io/nexo-edge/preflight/upgrade"
	"github.com/nexo-io/nexo-edge/test/framework/fleet"
	"github.com/nexo-io/nexo-edge/test/framework/testcluster"
	"github.com/nexo-io/nexo-edge/test/framework/testinstall"
)

// from is the release the suite upgrades from.
const from = "0.2.0"

// proxies is how many NexoProxies run through the upgrade.
const proxies = 50

// bins are the binaries of both sides: old (built from the release's source commit) and new
// (the build under test).
var bins = map[string]string{}

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	ctrllog.SetLogger(logr.Discard())
	dir, err := os.MkdirTemp("", "nexo-upgrade-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if err := build(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// build builds the old operator, Manager and nexoctl from the source commit releases/0.2.0
// names, and the new ones from this tree.
func build(dir string) error {
	root := testcluster.RepoRoot()
	old, err := releasebuild.Build(root, from, dir, "operator", "manager", "nexoctl")
	if err != nil {
		return err
	}
	for name, bin := range old {
		bins["old-"+name] = bin
	}
	for _, name := range []string{"operator", "manager", "nexoctl", "controlplane"} {
		bins[name] = filepath.Join(dir, name)
		cmd := exec.Command("go", "build", "-ldflags", buildinfo.LinkFlags("20261204.0000", "under-test"), "-o", bins[name], "./cmd/"+name)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("build %s: %v\n%s", name, err, out)
		}
	}
	out, err := exec.Command(bins["old-nexoctl"], "version", "--client").CombinedOutput()
	if err != nil || !strings.Contains(string(out), from+"+") {
		return fmt.Errorf("the nexoctl built from releases/%s says %q (%v)", from, out, err)
	}
	return nil
}

// TestUpgradeWithHelm: releases/0.2.0's chart through the Helm SDK, upgraded with nexoctl
// install; then a downgrade with 0.2.0's nexoctl is refused and changes nothing.
func TestUpgradeWithHelm(t *testing.T) { upgradeCase(t, "helm") }

// TestUpgradeWithKustomize: releases/0.2.0's kustomize configuration, upgraded by applying this
// build's config/default, as kubectl apply -k does.
func TestUpgradeWithKustomize(t *testing.T) { upgradeCase(t, "kustomize") }

// suite is one upgrade case's cluster and helpers.
type suite struct {
	t       *testing.T
	ctx     context.Context
	dir     string
	cluster *testcluster.Cluster
	k8s     client.WithWatch
	// license signs the fleet's license; the operators trust its public key
	// (license-authority.pem).
	license ed25519.PrivateKey
}

func (s *suite) path(name string) string { return filepath.Join(s.dir, name) }

func upgradeCase(t *testing.T, how string) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := &suite{t: t, ctx: ctx, dir: t.TempDir()}
	var err error
	s.cluster, err = testcluster.Start(ctx, testcluster.Options{Mode: testcluster.Full, Nodes: []testcluster.Node{{Name: "edge-a"}, {Name: "edge-b"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.cluster.Stop() })
	if s.k8s, err = client.NewWithWatch(s.cluster.Config, client.Options{Scheme: scheme.New()}); err != nil {
		t.Fatal(err)
	}
	cpURL, admin, envID := s.controlPlane()
	s.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testinstall.Namespace}})
	s.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fleet"}})

	// 0.2.0, as released.
	switch how {
	case "helm":
		s.helmInstallRelease(envID, cpURL)
	case "kustomize":
		s.kustomizeApply(filepath.Join(testcluster.RepoRoot(), "releases", from))
		s.create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "nexo-manager-config", Namespace: testinstall.Namespace},
			Data: map[string]string{"controlPlaneURL": cpURL}})
		// kustomize grants pull-Secret copies nowhere: the admin binds them where proxies run
		// (docs/rbac.md).
		s.create(&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "nexo-operator-secret-copies", Namespace: "fleet"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "nexo-operator-secret-copies"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: wire.OperatorName, Namespace: testinstall.Namespace}}})
	}
	token, err := os.ReadFile(s.path("connect-token"))
	if err != nil {
		t.Fatal(err)
	}
	s.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: wire.ConnectTokenSecret, Namespace: testinstall.Namespace, Labels: map[string]string{wire.PartOfLabel: wire.PartOf}},
		Data: map[string][]byte{wire.ConnectTokenKey: token}})
	if err := testinstall.WaitCRDsServed(ctx, s.cluster.Config, len(catalog.Kinds), time.Minute); err != nil {
		t.Fatal(err)
	}
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	if err := os.WriteFile(s.path("license-authority.pem"), signature.MarshalPublicKey(pub), 0o644); err != nil {
		t.Fatal(err)
	}
	s.license = priv
	op := s.start("nexo-operator", bins["old-operator"], "--environment-id="+envID)
	mgr := s.start("nexo-manager", bins["old-manager"])
	s.fleet()
	s.poll("the Manager reports bundle "+from, time.Minute, func() (bool, string) {
		inv := view(t, admin, envID).Inventory
		return inv.BundleVersion == from && strings.HasPrefix(inv.ManagerVersion, from+"+"), fmt.Sprint(inv.BundleVersion, " ", inv.ManagerVersion)
	})
	census := s.census()

	// A rendering change stands in for a release that renders differently: with the old
	// operator stopped, proxy-0's pod template is set to what "an older renderer" made. The new
	// operator must put it back, and the preflight must say so beforehand.
	op.Stop()
	s.tamper("proxy-0")
	before := s.templates()
	revisionsBefore := map[string]string{}
	list := &nexov1alpha1.NexoProxyList{}
	if err := s.k8s.List(ctx, list, client.InNamespace("fleet")); err != nil {
		t.Fatal(err)
	}
	for _, p := range list.Items {
		revisionsBefore[p.Name] = p.Status.GraphRevision
	}
	// Every proxy rolls once when this build renders another runtime contract than the running
	// release (0.2.0's config names none: docs/upgrade.md, "0.2.0 to 0.3.0"); otherwise only the
	// tampered one does.
	wantRolls := 1
	running, err := testinstall.RuntimeContract(ctx, s.k8s, "fleet", "proxy-1")
	if err != nil {
		t.Fatal(err)
	}
	if running != render.ContractVersion {
		wantRolls = proxies
		t.Logf("%s renders runtime contract %q, this build %q: every proxy rolls once", from, running, render.ContractVersion)
	}

	// Before upgrading: what the new nexoctl says.
	report, out := s.preflightUpgrade()
	if report.Breaking || !report.Edge.OK || report.Installed != from || report.ObjectsChecked < proxies {
		t.Fatalf("preflight --upgrade from %s:\n%s", from, out)
	}
	// 0.2.0 had no deploy limit: the preflight says the upgraded Manager would deploy nowhere,
	// and which value to set on this install path.
	if l := report.DeployLimit; l.OK || !strings.Contains(l.Message, "deploys nowhere") || !strings.Contains(l.Message, "manager.deployNamespaces") ||
		!strings.Contains(l.Message, "nexo-manager-limits") || !strings.Contains(out, "! deploy limit: after the upgrade the Manager deploys nowhere") {
		t.Errorf("preflight --upgrade on %s's unlimited Manager: %+v\n%s", from, l, out)
	}
	predicted := map[string]string{}
	for _, p := range report.Proxies {
		predicted[p.Name] = p.Outcome
	}
	if len(predicted) != proxies || predicted["proxy-0"] != upgrade.OutcomeRolls || report.Count(upgrade.OutcomeRolls) != wantRolls || report.Count(upgrade.OutcomeUnchanged) != proxies-wantRolls {
		t.Fatalf("predicted %v, want proxy-0 and %d in all to roll, %d unchanged:\n%s", predicted, wantRolls, proxies-wantRolls, out)
	}

	// From here on: every proxy the preflight did not name stays Ready; the one it named is
	// Progressing while it rolls (the operator's contract), and no proxy Deployment ever has
	// fewer available replicas than it wants (one pod at a time, none taken away first).
	notReady := s.watch(&nexov1alpha1.NexoProxyList{}, func(o client.Object) bool {
		c := meta.FindStatusCondition(o.(*nexov1alpha1.NexoProxy).Status.Conditions, nexov1alpha1.ConditionReady)
		return c == nil || c.Status != metav1.ConditionTrue
	})
	unavailable := s.watch(&appsv1.DeploymentList{}, func(o client.Object) bool {
		d := o.(*appsv1.Deployment)
		return d.Status.AvailableReplicas < *d.Spec.Replicas
	})

	// The upgrade.
	switch how {
	case "helm":
		if out := s.nexoctl("nexoctl", "install", "--token-file", "connect-token"); !strings.Contains(out, "upgraded") {
			t.Fatalf("nexoctl install: %s", out)
		}
	case "kustomize":
		s.kustomizeApply(filepath.Join(testcluster.RepoRoot(), "config", "default"))
	}
	mgr.Stop()
	op = s.start("nexo-operator", bins["operator"], "--environment-id="+envID, "--metrics-secure=false")
	mgr = s.start("nexo-manager", bins["manager"])
	_ = mgr

	// The new operator has looked at every proxy: proxy-0's template is back, and every proxy
	// was reconciled (its reconcile counter), without a write to the others.
	s.poll("the new operator reconciled every proxy", 2*time.Minute, func() (bool, string) {
		n := reconciles(op.MetricsAddr)
		return n >= proxies, fmt.Sprint(n, " reconciles")
	})
	s.poll("proxy-0 is back on its rendered template", time.Minute, func() (bool, string) {
		d := s.deployment("proxy-0")
		return d.Spec.Template.Annotations[tamperKey] == "", fmt.Sprint(d.Spec.Template.Annotations)
	})
	// Converged on what this build renders: with a new runtime contract every proxy has a new
	// graph revision (until the new operator has looked at it, its status still shows the old).
	if err := fleet.Wait(ctx, s.k8s, "fleet", proxies, 2*time.Minute, func(p *nexov1alpha1.NexoProxy) bool {
		return fleet.Converged(p) && (wantRolls != proxies || p.Status.GraphRevision != revisionsBefore[p.Name])
	}); err != nil {
		t.Fatal(err)
	}
	after := s.templates()
	for name, tmpl := range before {
		changed := after[name] != tmpl
		if changed != (predicted[name] == upgrade.OutcomeRolls) {
			t.Errorf("%s: pod template changed %v, the preflight said %s", name, changed, predicted[name])
		}
	}
	if got := s.census(); got != census {
		t.Errorf("objects before the upgrade:\n%s\nafter:\n%s", census, got)
	}
	for _, n := range notReady() {
		if predicted[n] != upgrade.OutcomeRolls {
			t.Errorf("%s was not Ready during the upgrade, and the preflight said it would be %s", n, predicted[n])
		}
	}
	if n := unavailable(); len(n) > 0 {
		t.Errorf("proxy Deployments with fewer available replicas than wanted during the upgrade: %v", n)
	}
	s.poll("the Manager reports bundle "+catalog.BuildVersion, time.Minute, func() (bool, string) {
		inv := view(t, admin, envID).Inventory
		return inv.BundleVersion == catalog.BuildVersion && strings.HasPrefix(inv.ManagerVersion, catalog.BuildVersion+"+"), fmt.Sprint(inv.BundleVersion, " ", inv.ManagerVersion)
	})

	if how != "helm" {
		return
	}
	// A downgrade with 0.2.0's nexoctl: refused, and nothing changes.
	revisions := s.helmRevisions()
	opBefore := s.operatorDeployment()
	out, err = s.run(bins["old-nexoctl"], "install", "--token-file", "connect-token")
	if err == nil || !strings.Contains(out, "newer than this nexoctl") || !strings.Contains(out, "nothing was changed") {
		t.Errorf("downgrade with %s's nexoctl: %v\n%s", from, err, out)
	}
	if got := s.helmRevisions(); got != revisions {
		t.Errorf("the refused downgrade changed the release: %d revisions, was %d", got, revisions)
	}
	if got := s.operatorDeployment(); got.Generation != opBefore.Generation || got.Labels["app.kubernetes.io/version"] != catalog.BuildVersion {
		t.Errorf("the refused downgrade changed the operator Deployment: generation %d (was %d), version %s", got.Generation, opBefore.Generation, got.Labels["app.kubernetes.io/version"])
	}
}

// controlPlane starts the reference Control Plane (this build) and registers an environment; the
// connect token goes to connect-token.
func (s *suite) controlPlane() (string, controlplane.AdminClient, string) {
	t := s.t
	if out, err := exec.Command(bins["controlplane"], "keygen", "--out", s.path("cp.key")).CombinedOutput(); err != nil {
		t.Fatalf("keygen: %v\n%s", err, out)
	}
	const adminToken = "upgrade-admin-token-0123456789"
	if err := os.WriteFile(s.path("admin-token"), []byte(adminToken), 0o600); err != nil {
		t.Fatal(err)
	}
	port, _ := testcluster.FreePort()
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	logFile, err := os.Create(s.path("controlplane.log"))
	if err != nil {
		t.Fatal(err)
	}
	serve := exec.Command(bins["controlplane"], "serve", "--db", s.path("cp.db"), "--listen", fmt.Sprintf("127.0.0.1:%d", port),
		"--signing-key", s.path("cp.key"), "--admin-token-file", s.path("admin-token"), "--heartbeat-interval", "1s")
	serve.Stdout, serve.Stderr = logFile, logFile
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = serve.Process.Kill(); _ = serve.Wait(); logFile.Close() })
	s.poll("the Control Plane answers", 30*time.Second, func() (bool, string) {
		resp, err := http.Get(url + "/")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil, fmt.Sprint(err)
	})
	out, err := s.run(bins["controlplane"], "--server", url, "--admin-token-file", s.path("admin-token"), "env", "create", "upgrade", "--token-out", s.path("connect-token"))
	if err != nil {
		t.Fatalf("env create: %v\n%s", err, out)
	}
	return url, controlplane.AdminClient{URL: url, Token: adminToken}, regexp.MustCompile(`environment (\S+) `).FindStringSubmatch(out)[1]
}

func view(t *testing.T, admin controlplane.AdminClient, envID string) controlplane.EnvironmentView {
	t.Helper()
	var v controlplane.EnvironmentView
	if err := admin.Do("GET", "/admin/environments/"+envID, nil, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// helmInstallRelease installs releases/0.2.0/chart as release nexo-edge, with the values
// nexoctl install sets.
func (s *suite) helmInstallRelease(envID, cpURL string) {
	ch, err := loader.LoadDir(filepath.Join(testcluster.RepoRoot(), "releases", from, "chart", "nexo-edge"))
	if err != nil {
		s.t.Fatal(err)
	}
	inst := action.NewInstall(s.helm())
	inst.ReleaseName, inst.Namespace = "nexo-edge", testinstall.Namespace
	values := map[string]any{"environmentID": envID, "manager": map[string]any{"controlPlaneURL": cpURL},
		"operator": map[string]any{"secretCopyNamespaces": []any{"fleet"}}}
	if _, err := inst.Run(ch, values); err != nil {
		s.t.Fatalf("helm install releases/%s: %v", from, err)
	}
}

func (s *suite) helm() *action.Configuration {
	settings := cli.New()
	settings.KubeConfig = s.cluster.Kubeconfig
	settings.SetNamespace(testinstall.Namespace)
	cfg := new(action.Configuration)
	if err := cfg.Init(settings.RESTClientGetter(), testinstall.Namespace, "secret", func(string, ...any) {}); err != nil {
		s.t.Fatal(err)
	}
	return cfg
}

func (s *suite) helmRevisions() int {
	h, err := action.NewHistory(s.helm()).Run("nexo-edge")
	if err != nil {
		s.t.Fatal(err)
	}
	return len(h)
}

// kustomizeApply applies a kustomization as the README says a user does, with the kubectl this
// repository builds (its kustomize is the one kubectl embeds): kubectl apply --server-side -k
// DIR. --force-conflicts takes over fields an earlier apply of another folder set (an upgrade
// from a release's folder to config/default), as a user following docs/upgrade.md does.
func (s *suite) kustomizeApply(dir string) {
	kubectl := filepath.Join(testcluster.BinDir(), "kubectl")
	out, err := exec.Command(kubectl, "--kubeconfig", s.cluster.Kubeconfig, "apply", "--server-side", "--force-conflicts", "-k", dir).CombinedOutput()
	if err != nil {
		s.t.Fatalf("kubectl apply --server-side -k %s: %v\n%s", dir, err, out)
	}
}

func (s *suite) create(o client.Object) {
	if err := s.k8s.Create(s.ctx, o); err != nil {
		s.t.Fatal(err)
	}
}

// start runs a Deployment of the install namespace as a local process with binary.
func (s *suite) start(name, binary string, extra ...string) *testinstall.LocalPod {
	t := s.t
	podDir, err := os.MkdirTemp(s.dir, name+"-")
	if err != nil {
		t.Fatal(err)
	}
	if name == wire.OperatorName {
		extra = append(extra, "--license-public-key="+s.path("license-authority.pem"))
	}
	// A container that exits before it is Ready is started again, as the kubelet restarts it
	// (restartPolicy Always): a process started just as the API server begins to serve the CRDs
	// can find no REST mapping for them and exit (0.2.0's operator does), where a pod would be
	// restarted a few seconds later.
	for attempt := 1; ; attempt++ {
		p, err := testinstall.RunDeployment(s.ctx, s.cluster.Config, testinstall.Namespace, name, testinstall.PodOptions{Dir: podDir, Binary: binary, ExtraArgs: extra,
			LogPath: filepath.Join(podDir, fmt.Sprintf("%s-%d.log", name, attempt))})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Stop)
		err = p.WaitReady(s.ctx, time.Minute)
		if err != nil && !p.Running() && attempt < 3 {
			t.Logf("%s exited before it was Ready (attempt %d); started again, as the kubelet would:\n%s", name, attempt, tail(p.Logs(), 5))
			p.Stop()
			time.Sleep(2 * time.Second)
			continue
		}
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("%s (%s) log:\n%s", name, filepath.Base(binary), tail(p.Logs(), 30))
			}
		})
		if err != nil {
			t.Fatalf("%s: %v\n%s", name, err, tail(p.Logs(), 30))
		}
		return p
	}
}

// fleet creates the shared graph and the proxies in namespace fleet, and waits until all are
// Ready.
func (s *suite) fleet() {
	doc, err := license.Issue(license.Claims{Licensee: "Upgrade", ExpiresAt: time.Now().Add(24 * time.Hour), Entitlements: fleet.Entitlements, MaxProxies: proxies}, s.license)
	if err != nil {
		s.t.Fatal(err)
	}
	objs := []client.Object{fleet.RegistrySecret(testinstall.Namespace)}
	objs = append(objs, fleet.Graph("fleet", doc)...)
	for i := 0; i < proxies; i++ {
		objs = append(objs, fleet.Proxy("fleet", i))
	}
	for _, o := range objs {
		s.create(o)
	}
	if err := fleet.Wait(s.ctx, s.k8s, "fleet", proxies, 3*time.Minute, fleet.Converged); err != nil {
		s.t.Fatal(err)
	}
}

// tamperKey marks the pod template the test changed.
const tamperKey = "upgrade.test/rendered-by"

// tamper changes proxy's pod template as a renderer of another release would have, and waits
// for the Deployment to roll onto it.
func (s *suite) tamper(proxy string) {
	d := s.deployment(proxy)
	d.Spec.Template.Annotations[tamperKey] = "an-older-renderer"
	if err := s.k8s.Update(s.ctx, d); err != nil {
		s.t.Fatal(err)
	}
	s.poll(proxy+" rolled onto the changed template", time.Minute, func() (bool, string) {
		d := s.deployment(proxy)
		return d.Status.ObservedGeneration == d.Generation && d.Status.UpdatedReplicas == *d.Spec.Replicas && d.Status.AvailableReplicas == *d.Spec.Replicas, fmt.Sprint(d.Status)
	})
}

func (s *suite) configMap(name string) (*corev1.ConfigMap, bool) {
	cm := &corev1.ConfigMap{}
	if err := s.k8s.Get(s.ctx, client.ObjectKey{Namespace: "fleet", Name: name}, cm); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, false
		}
		s.t.Fatal(err)
	}
	return cm, true
}

func (s *suite) deployment(name string) *appsv1.Deployment {
	d := &appsv1.Deployment{}
	if err := s.k8s.Get(s.ctx, client.ObjectKey{Namespace: "fleet", Name: name}, d); err != nil {
		s.t.Fatal(err)
	}
	return d
}

func (s *suite) operatorDeployment() *appsv1.Deployment {
	d := &appsv1.Deployment{}
	if err := s.k8s.Get(s.ctx, client.ObjectKey{Namespace: testinstall.Namespace, Name: wire.OperatorName}, d); err != nil {
		s.t.Fatal(err)
	}
	return d
}

// templates hashes every proxy Deployment's pod template.
func (s *suite) templates() map[string]string {
	list := &appsv1.DeploymentList{}
	if err := s.k8s.List(s.ctx, list, client.InNamespace("fleet")); err != nil {
		s.t.Fatal(err)
	}
	out := map[string]string{}
	for _, d := range list.Items {
		raw, _ := json.Marshal(d.Spec.Template)
		out[d.Name] = fmt.Sprintf("%x", sha256.Sum256(raw))
	}
	return out
}

// census lists every Nexo object (kind, namespace, name, uid) and every proxy child, so a lost or
// re-created object shows.
// census lists the Nexo objects and the proxies' children with their UIDs, so an upgrade that
// deletes and recreates anything shows. A proxy's config ConfigMaps are per graph revision
// (docs/operator.md): they are listed by proxy as "the running revision's pair, and at most the
// previous revision's", which a rollout keeps true.
func (s *suite) census() string {
	var lines []string
	for _, k := range catalog.Kinds {
		list := &unstructured.UnstructuredList{}
		list.SetAPIVersion(catalog.Group + "/" + catalog.Version)
		list.SetKind(k.Kind + "List")
		if err := s.k8s.List(s.ctx, list); err != nil {
			s.t.Fatal(err)
		}
		for _, o := range list.Items {
			lines = append(lines, fmt.Sprintf("%s %s/%s %s", k.Kind, o.GetNamespace(), o.GetName(), o.GetUID()))
		}
	}
	for _, l := range []client.ObjectList{&appsv1.DeploymentList{}, &corev1.ServiceList{}, &corev1.ConfigMapList{}, &corev1.SecretList{}} {
		if err := s.k8s.List(s.ctx, l, client.InNamespace("fleet")); err != nil {
			s.t.Fatal(err)
		}
		items, _ := meta.ExtractList(l)
		perProxy := map[string]int{}
		for _, o := range items {
			m, _ := meta.Accessor(o)
			if proxy := m.GetLabels()[wire.ProxyLabel]; proxy != "" && render.ConfigRevision(proxy, m.GetName()) != "" {
				perProxy[proxy]++
				continue
			}
			lines = append(lines, fmt.Sprintf("%T %s %s", l, m.GetName(), m.GetUID()))
		}
		for proxy, n := range perProxy {
			current := s.deployment(proxy).Spec.Template.Annotations[render.GraphRevisionKey]
			_, hasCurrent := s.configMap(render.RoutingName(proxy, current))
			lines = append(lines, fmt.Sprintf("config of %s: the running revision's %v, two or four ConfigMaps %v", proxy, hasCurrent, n == 2 || n == 4))
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// watch records the names of the objects of list in namespace fleet that bad reports, from now
// until the returned function is called.
func (s *suite) watch(list client.ObjectList, bad func(client.Object) bool) func() []string {
	w, err := s.k8s.Watch(s.ctx, list, client.InNamespace("fleet"))
	if err != nil {
		s.t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string]bool{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if o, ok := ev.Object.(client.Object); ok && bad(o) {
				mu.Lock()
				seen[o.GetName()] = true
				mu.Unlock()
			}
		}
	}()
	return func() []string {
		w.Stop()
		<-done
		mu.Lock()
		defer mu.Unlock()
		var out []string
		for n := range seen {
			out = append(out, n)
		}
		sort.Strings(out)
		return out
	}
}

// preflightUpgrade runs the new nexoctl preflight --upgrade, as JSON and as text.
func (s *suite) preflightUpgrade() (*upgrade.Report, string) {
	raw, err := s.run(bins["nexoctl"], "preflight", "--upgrade", "-o", "json", "--kubeconfig", s.cluster.Kubeconfig)
	r := &upgrade.Report{}
	if jerr := json.Unmarshal([]byte(raw), r); jerr != nil {
		s.t.Fatalf("preflight --upgrade: %v %v\n%s", err, jerr, raw)
	}
	text, _ := s.run(bins["nexoctl"], "preflight", "--upgrade", "--kubeconfig", s.cluster.Kubeconfig)
	return r, text
}

// nexoctl runs the new nexoctl in the test's folder (which holds connect-token).
func (s *suite) nexoctl(args ...string) string {
	out, err := s.run(bins[args[0]], append(args[1:], "--kubeconfig", s.cluster.Kubeconfig)...)
	if err != nil {
		s.t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func (s *suite) run(bin string, args ...string) (string, error) {
	if bin == bins["old-nexoctl"] {
		args = append(args, "--kubeconfig", s.cluster.Kubeconfig)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = s.dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (s *suite) poll(what string, timeout time.Duration, f func() (bool, string)) {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	last := ""
	for time.Now().Before(deadline) {
		ok, msg := f()
		if ok {
			return
		}
		last = msg
		time.Sleep(250 * time.Millisecond)
	}
	s.t.Fatalf("%s: not within %s (last: %s)", what, timeout, last)
}

// reconciles reads the operator's NexoProxy reconcile counter from its plain-HTTP metrics.
func reconciles(addr string) int {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	n := 0
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, `controller_runtime_reconcile_total{controller="nexoproxies"`) {
			var v float64
			if _, err := fmt.Sscan(line[strings.LastIndex(line, " ")+1:], &v); err == nil {
				n += int(v)
			}
		}
	}
	return n
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
