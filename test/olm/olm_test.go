// Package olm_test installs the bundle through real OLM (the upstream olm and catalog operators,
// built from the snapshot the OLM_TOOLS folder holds) on the full local cluster, once per install
// mode: AllNamespaces, OwnNamespace and SingleNamespace OperatorGroups. In each, the operator and
// the Manager run as the ServiceAccounts OLM created, with the args and env OLM rendered into
// their Deployments; a deploy signed by the reference Control Plane becomes Ready; and the
// effective permissions of both ServiceAccounts (SubjectAccessReview) are exactly docs/rbac.md's
// OLM table for that mode. `make test-olm` runs it (not `make test`: OLM's cold build is long).
package olm_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	operatorsv1 "github.com/operator-framework/api/pkg/operators/v1"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/yaml"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/catalog"
	"github.com/nexo-io/nexo-edge/contract/license"
	"github.com/nexo-io/nexo-edge/contract/protocol"
	"github.com/nexo-io/nexo-edge/contract/scheme"
	"github.com/nexo-io/nexo-edge/contract/signature"
	"github.com/nexo-io/nexo-edge/contract/wire"
	"github.com/nexo-io/nexo-edge/controlplane"
	"github.com/nexo-io/nexo-edge/test/framework/monitoring"
	"github.com/nexo-io/nexo-edge/test/framework/rbacdoc"
	"github.com/nexo-io/nexo-edge/test/framework/testcluster"
	"github.com/nexo-io/nexo-edge/test/framework/testinstall"
)

const installNS = "nexo-system"

var (
	bins = map[string]string{} // product binaries
	olm  string                // the folder build.sh filled: olm, catalog, fbcserve, crds/
	// catalogAddr is the loopback address of the file-based catalog of this build's bundle.
	catalogAddr string
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	ctrllog.SetLogger(logr.Discard())
	dir, err := os.MkdirTemp("", "nexo-olm-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	tools := os.Getenv("OLM_TOOLS")
	if tools == "" {
		tools = filepath.Join(testcluster.RepoRoot(), "..", "shared", "tools", "olm")
	}
	out, err := exec.Command(filepath.Join(tools, "build.sh")).Output()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build OLM from %s (set OLM_TOOLS to its folder): %v\n", tools, err)
		return 1
	}
	olm = strings.TrimSpace(string(out))
	for name, pkg := range map[string]string{"operator": "./cmd/operator", "manager": "./cmd/manager", "controlplane": "./cmd/controlplane", "nexoctl": "./cmd/nexoctl"} {
		bins[name] = filepath.Join(dir, name)
		cmd := exec.Command("go", "build", "-o", bins[name], pkg)
		cmd.Dir = testcluster.RepoRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build %s: %v\n%s", name, err, out)
			return 1
		}
	}
	// The catalog: this build's bundle, its manifests inline (no bundle image to unpack), in a
	// channel after the release it replaces (releases/<version>/bundle), so the upgrade edge is
	// the one OLM reads.
	fbc := filepath.Join(dir, "catalog")
	args := []string{filepath.Join(tools, "fbc.py"), filepath.Join(testcluster.RepoRoot(), "bundle"), fbc}
	if prev := replacedBundle(); prev != "" {
		args = append(args, prev)
	}
	if out, err := exec.Command("python3", args...).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "fbc.py: %v\n%s", err, out)
		return 1
	}
	port, _ := testcluster.FreePort()
	catalogAddr = fmt.Sprintf("127.0.0.1:%d", port)
	serve := exec.Command(filepath.Join(olm, "fbcserve"), "--dir", fbc, "--cache", filepath.Join(dir, "cache"), "--addr", catalogAddr)
	logf, _ := os.Create(filepath.Join(dir, "fbcserve.log"))
	serve.Stdout, serve.Stderr = logf, logf
	serve.SysProcAttr = orphanless
	if err := serve.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = serve.Process.Kill(); _ = serve.Wait() }()
	return m.Run()
}

// mode is one OperatorGroup shape.
type mode struct {
	name    string
	targets []string // the OperatorGroup's targetNamespaces; nil: all namespaces
	deploy  string   // where the Control Plane deploys the proxy
}

func TestInstallModes(t *testing.T) {
	for _, m := range []mode{
		{name: "AllNamespaces", deploy: "shop"},
		{name: "OwnNamespace", targets: []string{installNS}, deploy: installNS},
		{name: "SingleNamespace", targets: []string{"shop"}, deploy: "shop"},
		{name: "MultiNamespace", targets: []string{"shop", "payments"}, deploy: "payments"},
	} {
		// Each mode has a cluster of its own: they run side by side, as many at once as
		// go test's -parallel allows (GOMAXPROCS: two here).
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			installAndCheck(t, m)
		})
	}
}

// covers is where docs/rbac.md's OLM table says a row applies, in this mode.
func (m mode) covers(where, ns string) bool {
	switch where {
	case "cluster":
		return true
	case "olm":
		return m.targets == nil || ns == installNS || slices.Contains(m.targets, ns)
	case "olm-global":
		return m.targets == nil
	}
	panic("unknown where " + where)
}

// olmCluster is the full local cluster with OLM's two operators running, the catalog of this
// build's bundle READY, the reference Control Plane and an environment.
type olmCluster struct {
	t       *testing.T
	ctx     context.Context
	dir     string
	cluster *testcluster.Cluster
	k8s     client.Client
	cp      func(args ...string) string
	cpURL   string
	envID   string
	sub     *operatorsv1alpha1.Subscription
}

func (c *olmCluster) path(name string) string { return filepath.Join(c.dir, name) }

func (c *olmCluster) logs() string {
	return "olm:\n" + testcluster.Tail(c.path("olm.log"), 15) + "\ncatalog:\n" + testcluster.Tail(c.path("catalog.log"), 15)
}

func newOLMCluster(t *testing.T) *olmCluster {
	c := &olmCluster{t: t, ctx: context.Background(), dir: t.TempDir()}
	ctx := c.ctx
	var err error
	c.cluster, err = testcluster.Start(ctx, testcluster.Options{Mode: testcluster.Full,
		CRDDirectoryPaths: []string{filepath.Join(olm, "crds")}, Nodes: []testcluster.Node{{Name: "olm-node"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.cluster.Stop() })
	s := scheme.New()
	_ = operatorsv1alpha1.AddToScheme(s)
	_ = operatorsv1.AddToScheme(s)
	_ = apiextensionsv1.AddToScheme(s)
	if c.k8s, err = client.New(c.cluster.Config, client.Options{Scheme: s}); err != nil {
		t.Fatal(err)
	}
	// The bundle ships a PrometheusRule: the cluster has prometheus-operator's CRDs, as every
	// OpenShift does (docs/monitoring.md).
	if err := monitoring.Install(ctx, c.k8s); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"olm", installNS, "shop", "payments", "elsewhere"} {
		if err := c.k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}

	// OLM's two operators, as local processes on their own loopback ports.
	for _, name := range []string{"olm", "catalog"} {
		args := []string{"--namespace", "olm", "--writeStatusName", ""}
		if name == "olm" {
			args = append(args, "--writePackageServerStatusName", "")
		}
		port, _ := testcluster.FreePort()
		cmd := exec.Command(filepath.Join(olm, name), args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+c.cluster.Kubeconfig, fmt.Sprintf("OLM_LISTEN=127.0.0.1:%d", port))
		logf, _ := os.Create(c.path(name + ".log"))
		cmd.Stdout, cmd.Stderr = logf, logf
		cmd.SysProcAttr = orphanless
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); _ = logf.Close() })
	}
	cs := &operatorsv1alpha1.CatalogSource{ObjectMeta: metav1.ObjectMeta{Name: "nexo-edge", Namespace: "olm"},
		Spec: operatorsv1alpha1.CatalogSourceSpec{SourceType: operatorsv1alpha1.SourceTypeGrpc, Address: catalogAddr, DisplayName: "Nexo Edge"}}
	if err := c.k8s.Create(ctx, cs); err != nil {
		t.Fatal(err)
	}
	poll(t, "the CatalogSource is READY", 2*time.Minute, c.logs, func() (bool, string) {
		if err := c.k8s.Get(ctx, client.ObjectKeyFromObject(cs), cs); err != nil || cs.Status.GRPCConnectionState == nil {
			return false, fmt.Sprint(err)
		}
		return cs.Status.GRPCConnectionState.LastObservedState == "READY", cs.Status.GRPCConnectionState.LastObservedState
	})
	c.cp, c.cpURL, c.envID = controlPlane(t, c.dir)
	return c
}

// controlPlaneEnv is the config.env of the Control Plane's install command: its URL, the
// environment id and the deploy limit.
func (c *olmCluster) controlPlaneEnv() []corev1.EnvVar {
	return append([]corev1.EnvVar{{Name: "NEXO_CONTROL_PLANE_URL", Value: c.cpURL}, {Name: "NEXO_ENVIRONMENT_ID", Value: c.envID}}, limitEnv()...)
}

// limitEnv is the cluster's own limit, OLM's way to set it (docs/security.md): what a console
// user adds to the Subscription, with nothing else.
func limitEnv() []corev1.EnvVar {
	return []corev1.EnvVar{{Name: "NEXO_DEPLOY_NAMESPACES", Value: protocol.AllowAll}, {Name: "NEXO_ALLOWED_IMAGE_REPOSITORIES", Value: protocol.AllowAll}}
}

// subscribe creates the OperatorGroup and a manually approved Subscription starting at
// startingCSV ("" for the channel head) with env as its config.env.
func (c *olmCluster) subscribe(targets []string, startingCSV string, env []corev1.EnvVar) {
	t := c.t
	og := &operatorsv1.OperatorGroup{ObjectMeta: metav1.ObjectMeta{Name: "nexo-edge", Namespace: installNS},
		Spec: operatorsv1.OperatorGroupSpec{TargetNamespaces: targets}}
	c.sub = &operatorsv1alpha1.Subscription{ObjectMeta: metav1.ObjectMeta{Name: "nexo-operator", Namespace: installNS},
		Spec: &operatorsv1alpha1.SubscriptionSpec{CatalogSource: "nexo-edge", CatalogSourceNamespace: "olm", Package: "nexo-operator",
			Channel: channel(t), InstallPlanApproval: operatorsv1alpha1.ApprovalManual, StartingCSV: startingCSV,
			Config: &operatorsv1alpha1.SubscriptionConfig{Env: env}}}
	for _, o := range []client.Object{og, c.sub} {
		if err := c.k8s.Create(c.ctx, o); err != nil {
			t.Fatal(err)
		}
	}
}

// approve approves the InstallPlan the Subscription names now, when it installs the CSV csv
// (the catalog operator may replace a plan it made a moment before, so it is looked up each
// time; after an install it names the next upgrade's plan, which waits for its own approval),
// and describes it.
func (c *olmCluster) approve(csv string) string {
	ctx := c.ctx
	sub := c.sub
	if err := c.k8s.Get(ctx, client.ObjectKeyFromObject(sub), sub); err != nil || sub.Status.InstallPlanRef == nil {
		return fmt.Sprint("no InstallPlan named yet ", err)
	}
	p := &operatorsv1alpha1.InstallPlan{}
	if err := c.k8s.Get(ctx, client.ObjectKey{Namespace: installNS, Name: sub.Status.InstallPlanRef.Name}, p); err != nil {
		return err.Error()
	}
	if !p.Spec.Approved && slices.Contains(p.Spec.ClusterServiceVersionNames, csv) {
		p.Spec.Approved = true
		if err := c.k8s.Update(ctx, p); err != nil {
			return err.Error()
		}
	}
	detail := fmt.Sprintf("InstallPlan %s %s %v", p.Name, p.Status.Phase, p.Spec.ClusterServiceVersionNames)
	for _, st := range p.Status.Plan {
		if st.Status != operatorsv1alpha1.StepStatusCreated && st.Status != operatorsv1alpha1.StepStatusPresent {
			detail += fmt.Sprintf("; step %s %s: %s", st.Resource.Kind, st.Resource.Name, st.Status)
		}
	}
	return detail
}

// csv reads the CSV named name in the install namespace.
func (c *olmCluster) csv(name string) *operatorsv1alpha1.ClusterServiceVersion {
	csv := &operatorsv1alpha1.ClusterServiceVersion{}
	if err := c.k8s.Get(c.ctx, client.ObjectKey{Namespace: installNS, Name: name}, csv); err != nil {
		c.t.Fatal(err)
	}
	return csv
}

// waitCSV approves plans until the CSV named name Succeeds, and returns it.
func (c *olmCluster) waitCSV(name string) *operatorsv1alpha1.ClusterServiceVersion {
	csv := &operatorsv1alpha1.ClusterServiceVersion{}
	poll(c.t, "the CSV "+name+" Succeeds", 4*time.Minute, c.logs, func() (bool, string) {
		if err := c.k8s.Get(c.ctx, client.ObjectKey{Namespace: installNS, Name: name}, csv); err != nil {
			return false, "no CSV yet; " + c.approve(name)
		}
		return csv.Status.Phase == operatorsv1alpha1.CSVPhaseSucceeded, fmt.Sprintf("%s: %s %s; %s", csv.Status.Phase, csv.Status.Reason, csv.Status.Message, c.approve(name))
	})
	return csv
}

// secrets creates the connect-token Secret and the empty trusted-keys Secret (the installer's,
// as for every install path) and a license for ns signed by a new license authority, whose
// public key goes to license-authority.pem.
func (c *olmCluster) secrets(ns string) {
	t := c.t
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Name: wire.ConnectTokenSecret, Namespace: installNS}, Data: map[string][]byte{wire.ConnectTokenKey: must(os.ReadFile(c.path("connect-token")))}},
		{ObjectMeta: metav1.ObjectMeta{Name: wire.TrustedKeysSecret, Namespace: installNS}},
	} {
		if err := c.k8s.Create(c.ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	c.license(ns)
}

// license is the customer's license document, in ns.
func (c *olmCluster) license(ns string) {
	t := c.t
	vendorPub, vendorKey, _ := ed25519.GenerateKey(rand.Reader)
	_ = os.WriteFile(c.path("license-authority.pem"), signature.MarshalPublicKey(vendorPub), 0o644)
	doc, _ := license.Issue(license.Claims{Licensee: "Acme Corp", ExpiresAt: time.Now().Add(24 * time.Hour), MaxProxies: 2}, vendorKey)
	if err := c.k8s.Create(c.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "acme-license", Namespace: ns},
		Data: map[string][]byte{"license": []byte(doc)}}); err != nil {
		t.Fatal(err)
	}
}

// start runs the Deployment name as OLM rendered it, as a local process with binary,
// authenticated as OLM's ServiceAccount, and waits until it is Ready.
func (c *olmCluster) start(name, binary string, extra ...string) *testinstall.LocalPod {
	t := c.t
	t.Helper()
	podDir, _ := os.MkdirTemp(c.dir, name+"-")
	p, err := testinstall.RunDeployment(c.ctx, c.cluster.Config, installNS, name, testinstall.PodOptions{Dir: podDir, Binary: binary, ExtraArgs: extra})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	if err := p.WaitReady(c.ctx, time.Minute); err != nil {
		t.Fatalf("%s: %v\n%s", name, err, tail(p.Logs(), 30))
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s (%s):\n%s", name, filepath.Base(binary), tail(p.Logs(), 30))
		}
	})
	return p
}

// deploy has the Control Plane deploy the hosted graph into ns and waits for a Ready proxy.
func (c *olmCluster) deploy(ns string) *nexov1alpha1.NexoProxy {
	graphFile := c.path("graph-" + ns + ".yaml")
	_ = os.WriteFile(graphFile, []byte(testinstall.HostedGraph(ns, 1)), 0o644)
	c.cp("command", "deploy", c.envID, "-f", graphFile, "--namespace", ns)
	proxy := &nexov1alpha1.NexoProxy{}
	poll(c.t, "the deployed proxy is Ready", 3*time.Minute, c.logs, func() (bool, string) {
		if err := c.k8s.Get(c.ctx, client.ObjectKey{Namespace: ns, Name: "orders-proxy"}, proxy); err != nil {
			return false, err.Error()
		}
		return proxy.Status.Phase == nexov1alpha1.ProxyReady && proxy.Status.ReadyReplicas == 1, fmt.Sprintf("phase %s, conditions %v", proxy.Status.Phase, proxy.Status.Conditions)
	})
	return proxy
}

func installAndCheck(t *testing.T, m mode) {
	c := newOLMCluster(t)
	ctx, k8s, cp, envID, olmLogs := c.ctx, c.k8s, c.cp, c.envID, c.logs
	// As from the console: a Subscription whose config.env holds only the deploy limit, no
	// Control Plane URL, environment id, token or trusted-keys Secret.
	c.subscribe(m.targets, "", limitEnv())
	csvName := "nexo-operator.v" + catalog.BuildVersion
	c.waitCSV(csvName)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s", olmLogs())
		}
	})
	// OLM created the bundle's metrics Services and alerts beside the Deployments.
	for _, o := range []client.Object{
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: installNS, Name: "nexo-operator-metrics"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: installNS, Name: "nexo-manager-metrics"}},
		func() client.Object {
			u := &unstructured.Unstructured{}
			u.SetAPIVersion("monitoring.coreos.com/v1")
			u.SetKind("PrometheusRule")
			u.SetNamespace(installNS)
			u.SetName("nexo-edge")
			return u
		}(),
	} {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
			t.Errorf("OLM did not create the bundle's %T %s: %v", o, o.GetName(), err)
		}
	}
	c.license(m.deploy)
	mgr := c.start(wire.ManagerName, bins["manager"]) // waits for /readyz: Ready though not configured
	managerStatus := func() map[string]string { return testinstall.ManagerStatus(ctx, k8s, installNS) }
	poll(t, "the unconfigured Manager says what is missing", time.Minute, olmLogs, func() (bool, string) {
		st := managerStatus()
		missing := st[wire.StatusNotConfigured]
		return st[wire.StatusConfigured] == "false" && strings.Contains(missing, "ConfigMap nexo-manager-config") && strings.Contains(missing, "Secret nexo-connect-token") &&
			strings.Contains(missing, "Secret nexo-trusted-keys"), fmt.Sprint(st)
	})
	if code, body := mgr.Probe("/readyz"); code != http.StatusOK {
		t.Errorf("the unconfigured Manager's /readyz answered %d %s, want 200 (OLM's Deployment check uses it)", code, body)
	}
	time.Sleep(6 * time.Second) // past the Manager's next look at its configuration
	if csv := c.csv(csvName); csv.Status.Phase != operatorsv1alpha1.CSVPhaseSucceeded {
		t.Errorf("before configuration the CSV is %s (%s: %s), want it to stay Succeeded", csv.Status.Phase, csv.Status.Reason, csv.Status.Message)
	}
	// The documented step: nexoctl install writes the installation ConfigMap and the Secrets.
	out, err := exec.Command(bins["nexoctl"], "--kubeconfig", c.cluster.Kubeconfig, "-n", installNS, "install",
		"--token-file", c.path("connect-token"), "--control-plane-url", c.cpURL).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "installed through OLM") || !strings.Contains(string(out), "ConfigMap "+installNS+"/"+wire.InstallConfigMap+" created") {
		t.Fatalf("nexoctl install on the console install: %v\n%s", err, out)
	}
	poll(t, "the Manager is configured and connected", time.Minute, olmLogs, func() (bool, string) {
		st := managerStatus()
		return st[wire.StatusConfigured] == "true" && st[wire.StatusLastHeartbeatResult] == "ok", fmt.Sprint(st)
	})
	c.start(wire.OperatorName, bins["operator"], "--license-public-key="+c.path("license-authority.pem"))
	c.deploy(m.deploy)
	if csv := c.csv(csvName); csv.Status.Phase != operatorsv1alpha1.CSVPhaseSucceeded {
		t.Errorf("after configuration the CSV is %s (%s)", csv.Status.Phase, csv.Status.Reason)
	}
	graphFile := c.path("graph.yaml")
	// The operator applied the admission policies for its installation: its binding, whose
	// parameters name its Manager and the namespaces OLM targets.
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
	poll(t, "the operator applies its admission binding", time.Minute, olmLogs, func() (bool, string) {
		err := k8s.Get(ctx, client.ObjectKey{Name: "nexo-managed-objects-" + installNS}, binding)
		return err == nil, fmt.Sprint(err)
	})
	scope := binding.Annotations["nexo.io/admission-namespaces"]
	sorted := slices.Sorted(slices.Values(m.targets)) // OLM writes olm.targetNamespaces sorted
	if want := strings.Join(sorted, ","); scope != want && (want != "" || scope != "*") {
		t.Errorf("the admission binding serves %q, want the OperatorGroup's targets %q", scope, want)
	}
	if got := binding.Annotations["nexo.io/admission-manager"]; got != "system:serviceaccount:"+installNS+":nexo-manager" {
		t.Errorf("the admission binding admits %q as the Manager", got)
	}
	// And its Manager's deploy-limit binding, from the Subscription's config.env.
	limit := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
	poll(t, "the operator applies its deploy-limit binding", time.Minute, olmLogs, func() (bool, string) {
		err := k8s.Get(ctx, client.ObjectKey{Name: "nexo-manager-deploy-limit-" + installNS}, limit)
		return err == nil, fmt.Sprint(err)
	})
	if a := limit.Annotations; a["nexo.io/admission-deploy-namespaces"] != protocol.AllowAll || a["nexo.io/admission-image-repositories"] != protocol.AllowAll ||
		a["nexo.io/admission-manager"] != "system:serviceaccount:"+installNS+":nexo-manager" {
		t.Errorf("the deploy-limit binding carries %v, want config.env's limits for %s's Manager", a, installNS)
	}

	// Outside the OperatorGroup the Manager deploys nothing: its ack names the namespaces it serves.
	if m.targets != nil {
		_ = os.WriteFile(graphFile, []byte(testinstall.HostedGraph("elsewhere", 1)), 0o644)
		printed := cp("command", "deploy", envID, "-f", graphFile, "--namespace", "elsewhere")
		id := regexp.MustCompile(`queued deploy (\S+)`).FindStringSubmatch(printed)
		if id == nil {
			t.Fatalf("no command id in %q", printed)
		}
		poll(t, "the deploy outside the target namespaces is refused", time.Minute, olmLogs, func() (bool, string) {
			var v controlplane.EnvironmentView
			if err := json.Unmarshal([]byte(cp("env", "show", envID)), &v); err != nil {
				return false, err.Error()
			}
			for _, c := range v.Commands {
				if c.ID == id[1] {
					return string(c.Status) == protocol.Failed && strings.Contains(c.Message, "this installation serves only "+strings.Join(sorted, ", ")), fmt.Sprintf("%s: %s", c.Status, c.Message)
				}
			}
			return false, "command not listed"
		})
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: "elsewhere", Name: "orders-proxy"}, &nexov1alpha1.NexoProxy{}); err == nil {
			t.Error("a proxy was created outside the OperatorGroup's target namespaces")
		}
	}

	// Effective permissions: exactly docs/rbac.md's OLM table, for this mode.
	rules, err := rbacdoc.Rules("OLM")
	if err != nil {
		t.Fatal(err)
	}
	kcs := kubernetes.NewForConfigOrDie(c.cluster.Config)
	resources, err := rbacdoc.ServedResources(kcs)
	if err != nil {
		t.Fatal(err)
	}
	for _, who := range []string{"operator", "manager"} {
		failures, n := rbacdoc.Check(ctx, kcs, rules, m.covers, rbacdoc.Subject{Who: who, Namespace: installNS, Name: "nexo-" + who},
			resources, []string{installNS, "shop", "payments", "elsewhere"})
		for _, f := range failures {
			t.Errorf("%s: %s", m.name, f)
		}
		t.Logf("%s %s: %d SubjectAccessReviews, %d differences from docs/rbac.md", m.name, who, n, len(failures))
	}
}

// controlPlane starts the reference Control Plane with an environment whose connect token is
// in dir/connect-token; it returns a runner for its admin CLI, its URL and the environment id.
func controlPlane(t *testing.T, dir string) (func(args ...string) string, string, string) {
	t.Helper()
	path := func(name string) string { return filepath.Join(dir, name) }
	if out, err := exec.Command(bins["controlplane"], "keygen", "--out", path("cp.key")).CombinedOutput(); err != nil {
		t.Fatalf("keygen: %v\n%s", err, out)
	}
	_ = os.WriteFile(path("admin-token"), []byte("olm-admin-token-0123456789"), 0o600)
	port, _ := testcluster.FreePort()
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	logf, _ := os.Create(path("controlplane.log"))
	serve := exec.Command(bins["controlplane"], "serve", "--db", path("cp.db"), "--listen", fmt.Sprintf("127.0.0.1:%d", port),
		"--signing-key", path("cp.key"), "--admin-token-file", path("admin-token"), "--heartbeat-interval", "1s")
	serve.Stdout, serve.Stderr = logf, logf
	serve.SysProcAttr = orphanless
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = serve.Process.Kill(); _ = serve.Wait(); _ = logf.Close() })
	cp := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(bins["controlplane"], append([]string{"--server", url, "--admin-token-file", path("admin-token")}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("controlplane %s: %v\n%s\nlog:\n%s", strings.Join(args, " "), err, out, testcluster.Tail(path("controlplane.log"), 20))
		}
		return string(out)
	}
	poll(t, "the Control Plane answers", 30*time.Second, nil, func() (bool, string) {
		resp, err := http.Get(url + "/")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil, fmt.Sprint(err)
	})
	created := cp("env", "create", "olm", "--token-out", path("connect-token"))
	return cp, url, regexp.MustCompile(`environment (\S+) `).FindStringSubmatch(created)[1]
}

// channel is the bundle's default channel.
func channel(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(testcluster.RepoRoot(), "bundle", "metadata", "annotations.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`channel\.default\.v1: (\S+)`).FindSubmatch(raw)
	if m == nil {
		t.Fatal("bundle/metadata/annotations.yaml names no default channel")
	}
	return string(m[1])
}

// orphanless: a process the test starts dies with the test binary, even when a timeout kills it.
var orphanless = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}

func poll(t *testing.T, what string, timeout time.Duration, logs func() string, f func() (bool, string)) {
	t.Helper()
	last := ""
	if err := wait.PollUntilContextTimeout(context.Background(), 300*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		ok, detail := f()
		last = detail
		return ok, nil
	}); err != nil {
		more := ""
		if logs != nil {
			more = "\n" + logs()
		}
		t.Fatalf("%s: not within %s; last: %s%s", what, timeout, last, more)
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// replacedBundle is the bundle folder of the release this build's CSV replaces ("" when none).
func replacedBundle() string {
	raw, err := os.ReadFile(filepath.Join(testcluster.RepoRoot(), "bundle", "manifests", "nexo-operator.clusterserviceversion.yaml"))
	if err != nil {
		return ""
	}
	csv := &operatorsv1alpha1.ClusterServiceVersion{}
	if yaml.Unmarshal(raw, csv) != nil || csv.Spec.Replaces == "" {
		return ""
	}
	return filepath.Join(testcluster.RepoRoot(), "releases", strings.TrimPrefix(csv.Spec.Replaces, "nexo-operator.v"), "bundle")
}
