// Package e2e_test runs the hosted path as a user does, with nothing wired by hand: the
// reference Control Plane binary registers an environment and prints its install command; that
// command, run as printed, installs the chart; the operator and the Manager run from the
// installed Deployments (LocalPod: their args, env and mounted Secrets, as the chart's
// ServiceAccounts); everything else goes through the Control Plane's CLI.
package e2e_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/catalog"
	"github.com/nexo-io/nexo-edge/contract/buildinfo"
	"github.com/nexo-io/nexo-edge/contract/license"
	"github.com/nexo-io/nexo-edge/contract/protocol"
	"github.com/nexo-io/nexo-edge/contract/scheme"
	"github.com/nexo-io/nexo-edge/contract/signature"
	"github.com/nexo-io/nexo-edge/contract/wire"
	"github.com/nexo-io/nexo-edge/controlplane"
	"github.com/nexo-io/nexo-edge/test/framework/monitoring"
	"github.com/nexo-io/nexo-edge/test/framework/reliabilityreport"
	"github.com/nexo-io/nexo-edge/test/framework/testcluster"
	"github.com/nexo-io/nexo-edge/test/framework/testinstall"
)

var (
	cluster *testcluster.Cluster
	k8s     client.Client
	bins    = map[string]string{}
)

// buildStamp is linked into the Manager, as the release build does, to show it in the inventory.
const buildStamp = "20261203.1-e2e0001"

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "nexo-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	stamp, commit, _ := strings.Cut(buildStamp, "-")
	for name, pkg := range map[string][]string{
		"nexoctl":      {"./cmd/nexoctl"},
		"controlplane": {"./cmd/controlplane"},
		"operator":     {"./cmd/operator"},
		"manager":      {"-ldflags", buildinfo.LinkFlags(stamp, commit), "./cmd/manager"},
	} {
		bins[name] = filepath.Join(dir, name)
		cmd := exec.Command("go", append([]string{"build", "-o", bins[name]}, pkg...)...)
		cmd.Dir = testcluster.RepoRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build %s: %v\n%s", name, err, out)
			return 1
		}
	}
	// No CRDs from the test: the chart installs them, as for a user.
	cluster, err = testcluster.Start(ctx, testcluster.Options{Mode: testcluster.Full, Nodes: []testcluster.Node{
		{Name: "edge-a", Region: "eu-west-1", Zone: "eu-west-1a"}, {Name: "edge-b", Region: "eu-west-1", Zone: "eu-west-1b"},
	}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "start the cluster:", err)
		return 1
	}
	defer cluster.Stop()
	if k8s, err = client.New(cluster.Config, client.Options{Scheme: scheme.New()}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

func TestHostedPathEndToEnd(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := func(name string) string { return filepath.Join(dir, name) }
	// The flow runs as named steps (a failure names its step: TestHostedPathEndToEnd/deploy);
	// each builds on the ones before, so the first failed step ends the test. cur is the step
	// running: the helpers below fail it, never the parent test from a step's goroutine.
	parent, cur := t, t
	step := func(name string, f func(t *testing.T)) {
		t.Helper()
		if !t.Run(name, func(st *testing.T) {
			cur = st
			defer func() { cur = parent }()
			f(st)
		}) {
			t.FailNow()
		}
	}
	// What the steps share.
	var (
		cpURL    string
		cpLog    logFile
		envID    string
		install  []string
		doc      string
		op, mgr  *testinstall.LocalPod
		second   *testinstall.LocalPod
		admin    controlplane.AdminClient
		oldKey   map[string]bool
		oldToken []byte
		// A token of Prometheus's ServiceAccount, bound to the metrics-reader role.
		scraperToken string
		// The license authority's key (the customer's licenses are signed with it).
		vendorKey ed25519.PrivateKey
	)
	cp := func(args ...string) string {
		cur.Helper()
		out, err := exec.Command(bins["controlplane"], append([]string{"--server", cpURL, "--admin-token-file", path("admin-token")}, args...)...).CombinedOutput()
		if err != nil {
			cur.Fatalf("controlplane %s: %v\n%s\nControl Plane log:\n%s", strings.Join(args, " "), err, out, cpLog.String())
		}
		return string(out)
	}
	// nexoctl runs from the folder holding ./connect-token, as the install command says.
	nexoctl := func(args ...string) string {
		cur.Helper()
		cmd := exec.Command(bins["nexoctl"], append(args, "--kubeconfig", cluster.Kubeconfig)...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			cur.Fatalf("nexoctl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	// start runs a Deployment the chart installed as a local process, until the test ends.
	pods := 0
	start := func(name, binary string, extra ...string) *testinstall.LocalPod {
		cur.Helper()
		pods++
		podDir := path(fmt.Sprintf("%s-%d", name, pods))
		_ = os.MkdirAll(podDir, 0o700)
		p, err := testinstall.RunDeployment(ctx, cluster.Config, testinstall.Namespace, name,
			testinstall.PodOptions{Dir: podDir, Binary: binary, ExtraArgs: extra})
		if err != nil {
			cur.Fatal(err)
		}
		parent.Cleanup(p.Stop)
		if err := p.WaitReady(ctx, time.Minute); err != nil {
			cur.Fatalf("%s: %v", name, err)
		}
		return p
	}
	view := func() controlplane.EnvironmentView {
		cur.Helper()
		var v controlplane.EnvironmentView
		if err := admin.Do("GET", "/admin/environments/"+envID, nil, &v); err != nil {
			cur.Fatal(err)
		}
		return v
	}
	deploy := func(replicas int) {
		cur.Helper()
		file := path(fmt.Sprintf("graph-%d.yaml", replicas))
		_ = os.WriteFile(file, []byte(testinstall.HostedGraph("shop", replicas, "registry.example.com/nexo/proxy:0.2.1")), 0o644)
		cp("command", "deploy", envID, "-f", file, "--namespace", "shop")
	}

	// The Control Plane, as its operator runs it.
	step("the Control Plane serves", func(t *testing.T) {
		if out, err := exec.Command(bins["controlplane"], "keygen", "--out", path("cp.key")).CombinedOutput(); err != nil {
			t.Fatalf("keygen: %v\n%s", err, out)
		}
		if err := os.WriteFile(path("admin-token"), []byte("e2e-admin-token-0123456789"), 0o600); err != nil {
			t.Fatal(err)
		}
		port, _ := testcluster.FreePort()
		cpURL = fmt.Sprintf("http://127.0.0.1:%d", port)
		cpLogFile, err := os.Create(path("controlplane.log"))
		if err != nil {
			t.Fatal(err)
		}
		defer cpLogFile.Close()
		cpLog = logFile(path("controlplane.log"))
		serve := exec.Command(bins["controlplane"], "serve", "--db", path("cp.db"), "--listen", fmt.Sprintf("127.0.0.1:%d", port),
			"--signing-key", path("cp.key"), "--admin-token-file", path("admin-token"), "--heartbeat-interval", "1s")
		serve.Stdout, serve.Stderr = cpLogFile, cpLogFile
		if err := serve.Start(); err != nil {
			t.Fatal(err)
		}
		parent.Cleanup(func() { _ = serve.Process.Kill(); _ = serve.Wait() })
		poll(t, "the Control Plane answers", 30*time.Second, func() (bool, string) {
			resp, err := http.Get(cpURL + "/")
			if err == nil {
				resp.Body.Close()
			}
			return err == nil, fmt.Sprint(err)
		})
	})

	// Register the environment, in tenant acme (its projects deploy through stages later); the
	// token goes to the file the install command names.
	step("register an environment", func(t *testing.T) {
		cp("tenant", "create", "acme")
		created := cp("env", "create", "e2e", "--tenant", "acme", "--token-out", path("connect-token"))
		envID = regexp.MustCompile(`environment (\S+) `).FindStringSubmatch(created)[1]
		install = installCommand(t, cp("env", "install-command", envID))
	})

	// Install exactly as printed, from the folder holding ./connect-token.
	// The cluster admin adds the cluster's own limit (docs/security.md): the Control Plane's
	// command cannot carry it, and without it the Manager deploys nowhere.
	step("install as printed", func(t *testing.T) {
		install = append(install, "--set", "manager.deployNamespaces={shop}", "--set", "manager.allowedImageRepositories={registry.example.com/nexo/proxy}")
		// A deploy namespace must exist first (the Manager's write RoleBinding goes there): refused
		// before any change, saying so.
		early := exec.Command(bins["nexoctl"], append(install, "--kubeconfig", cluster.Kubeconfig)...)
		early.Dir = dir
		if out, err := early.CombinedOutput(); err == nil || !strings.Contains(string(out), "kubectl create namespace shop") || !strings.Contains(string(out), "nothing was changed") {
			t.Fatalf("install with manager.deployNamespaces naming a missing namespace: %v\n%s", err, out)
		}
		if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}); err != nil {
			t.Fatal(err)
		}
		if out := nexoctl(install...); !strings.Contains(out, "installed") {
			t.Fatalf("install: %s", out)
		}
		// The chart's CRDs are served before the operator starts (a pod started earlier would be
		// restarted by the kubelet; a local process is not).
		if err := testinstall.WaitCRDsServed(ctx, cluster.Config, len(catalog.Kinds), time.Minute); err != nil {
			t.Fatal(err)
		}
	})

	// Namespace teams bound to the built-in edit and view roles can use the Nexo kinds (the
	// chart's aggregated ClusterRoles; kube-controller-manager aggregates them).
	step("team roles", func(t *testing.T) {
		teamRoles(t)
	})

	// The customer's own license (a test license authority: the one thing a test cannot get
	// from the Control Plane is a license signed by the vendor's key).
	step("a customer license", func(t *testing.T) {
		var vendorPub ed25519.PublicKey
		vendorPub, vendorKey, _ = ed25519.GenerateKey(rand.Reader)
		_ = os.WriteFile(path("license-authority.pem"), signature.MarshalPublicKey(vendorPub), 0o644)
		doc, _ = license.Issue(license.Claims{Licensee: "Acme Corp", ExpiresAt: time.Now().Add(24 * time.Hour), MaxProxies: 2}, vendorKey)
		for _, o := range []client.Object{
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "acme-license", Namespace: "shop"}, Data: map[string][]byte{"license": []byte(doc)}},
		} {
			if err := k8s.Create(ctx, o); err != nil {
				t.Fatal(err)
			}
		}
	})

	// The operator and the Manager, from the Deployments the chart installed; debug logging, so
	// the secret search below sees everything the processes can say.
	step("the operator and the Manager start", func(t *testing.T) {
		op = start("nexo-operator", bins["operator"], "--license-public-key="+path("license-authority.pem"), "--zap-log-level=debug")
		mgr = start("nexo-manager", bins["manager"], "--zap-log-level=debug")
		parent.Cleanup(func() {
			if parent.Failed() {
				parent.Logf("operator log:\n%s\nManager log:\n%s\nControl Plane log:\n%s", tail(op.Logs(), 40), tail(mgr.Logs(), 40), tail(cpLog.String(), 20))
			}
		})
		scraperToken = authenticatedMetrics(t, map[string]string{op.MetricsAddr: "controller_runtime_reconcile_total", mgr.MetricsAddr: "nexo_manager_last_heartbeat_timestamp_seconds"})
		admin = controlplane.AdminClient{URL: cpURL, Token: "e2e-admin-token-0123456789"}
	})

	// Reported: healthy, with the inventory read from what was installed.
	step("reported healthy", func(t *testing.T) {
		poll(t, "the environment is healthy", time.Minute, func() (bool, string) {
			out := cp("env", "list")
			return regexp.MustCompile(envID + `\s+e2e\s+healthy`).MatchString(out), out
		})
		inv := view().Inventory
		switch {
		case inv.ProxyImage != catalog.DefaultProxyImage:
			t.Errorf("proxy image %q, want the chart's default %s", inv.ProxyImage, catalog.DefaultProxyImage)
		case inv.BundleVersion != catalog.BuildVersion || inv.InstalledBy != "helm":
			t.Errorf("bundle %q installed by %q, want %s by helm", inv.BundleVersion, inv.InstalledBy, catalog.BuildVersion)
		case inv.ManagerVersion != catalog.BuildVersion+"+"+buildStamp:
			t.Errorf("Manager build id %q, want %s+%s", inv.ManagerVersion, catalog.BuildVersion, buildStamp)
		}
		oldKey = trustedKeys(t)
		if len(oldKey) != 1 {
			t.Fatalf("trusted keys after the first heartbeat: %v, want the Control Plane's one key", oldKey)
		}
	})

	// Deploy (signed by the Control Plane): Ready, and reported.
	step("deploy", func(t *testing.T) {
		deploy(1)
		proxy := waitProxy(t, "the deployed proxy is Ready", func(p *nexov1alpha1.NexoProxy) bool { return p.Status.ReadyReplicas == 1 })
		if c := meta.FindStatusCondition(proxy.Status.Conditions, nexov1alpha1.ConditionSignatureValid); c == nil || c.Reason != "Signed" {
			t.Errorf("SignatureValid %v, want Signed", c)
		}
		poll(t, "the Control Plane sees the proxy", 30*time.Second, func() (bool, string) {
			d := view().Inventory.Deployments
			return len(d) == 1 && d[0].Name == "orders-proxy" && d[0].ReadyReplicas == 1, fmt.Sprint(d)
		})
	})

	// Rollout: the new image reaches the Deployment and the proxy is Ready on it.
	step("rollout", func(t *testing.T) {
		cp("command", "rollout", envID, "--image", "registry.example.com/nexo/proxy:0.2.1")
		waitProxy(t, "the rolled-out proxy is Ready", func(p *nexov1alpha1.NexoProxy) bool {
			d := &appsv1.Deployment{}
			if k8s.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "orders-proxy"}, d) != nil {
				return false
			}
			return d.Spec.Template.Spec.Containers[0].Image == "registry.example.com/nexo/proxy:0.2.1" && p.Status.ReadyReplicas == 1 &&
				d.Status.UpdatedReplicas == 1 && d.Status.ObservedGeneration == d.Generation
		})
	})

	// Signing-key rotation: both keys trusted during the overlap; what the new key signed is
	// accepted; after the old key is retired the cluster trusts only the new one, and the proxy
	// (redeployed under the new key) keeps running. No process restarts.
	step("signing-key rotation", func(t *testing.T) {
		rotated := cp("signing-key", "rotate")
		newKey := regexp.MustCompile(`signing key (\S+) is active`).FindStringSubmatch(rotated)[1]
		poll(t, "both keys are trusted", 30*time.Second, func() (bool, string) {
			k := trustedKeys(t)
			return len(k) == 2 && k[newKey], fmt.Sprint(k)
		})
		deploy(2)
		waitProxy(t, "the proxy redeployed under the new key is Ready", func(p *nexov1alpha1.NexoProxy) bool {
			return p.Annotations[wire.KeyIDAnnotation] == newKey && p.Status.ReadyReplicas == 2
		})
		for k := range oldKey {
			cp("signing-key", "retire", k)
		}
		poll(t, "only the new key is trusted", 30*time.Second, func() (bool, string) {
			k := trustedKeys(t)
			return len(k) == 1 && k[newKey], fmt.Sprint(k)
		})
		waitProxy(t, "the proxy is still Ready and Signed after the retirement", func(p *nexov1alpha1.NexoProxy) bool {
			c := meta.FindStatusCondition(p.Status.Conditions, nexov1alpha1.ConditionSignatureValid)
			return c != nil && c.Reason == "Signed" && p.Status.ReadyReplicas == 2
		})
	})

	// Token rotation, as the Control Plane tells: the new token installed with nexoctl, the
	// Manager follows without a restart, and the old token is refused as rotated.
	step("connect-token rotation", func(t *testing.T) {
		oldToken, _ = os.ReadFile(path("connect-token"))
		hint := cp("env", "rotate-token", envID, "--token-out", path("new-token"))
		reinstall := regexp.MustCompile(`install it with: (nexoctl install --token-file \S+)`).FindStringSubmatch(hint)
		if reinstall == nil {
			t.Fatalf("rotate-token does not say how to install the new token:\n%s", hint)
		}
		if out := nexoctl(strings.Fields(reinstall[1])[1:]...); !strings.Contains(out, "upgraded") {
			t.Fatalf("re-install with the new token: %s", out)
		}
		poll(t, "the old token is refused as rotated", time.Minute, func() (bool, string) {
			code, body := heartbeatWith(t, cpURL, strings.TrimSpace(string(oldToken)))
			return code == http.StatusUnauthorized && strings.Contains(body, "rotated"), fmt.Sprint(code, " ", body)
		})
		before := view().LastHeartbeat
		poll(t, "the Manager heartbeats with the new token", 30*time.Second, func() (bool, string) {
			v := view()
			return v.LastHeartbeat != nil && before != nil && v.LastHeartbeat.After(*before) && v.State == controlplane.StateHealthy, fmt.Sprint(v.Health)
		})
	})

	// Uninstall through the Control Plane: the proxy and its children go.
	step("uninstall", func(t *testing.T) {
		cp("command", "uninstall", envID, "--proxy", "shop/orders-proxy")
		poll(t, "the proxy and its Deployment are gone", time.Minute, func() (bool, string) {
			errP := k8s.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "orders-proxy"}, &nexov1alpha1.NexoProxy{})
			errD := k8s.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "orders-proxy"}, &appsv1.Deployment{})
			return apierrors.IsNotFound(errP) && apierrors.IsNotFound(errD), fmt.Sprint(errP, errD)
		})
		// The Manager acknowledges after it deleted: the proxy can be gone a moment before the ack.
		poll(t, "every command acknowledged applied", 30*time.Second, func() (bool, string) {
			var pending []string
			for _, c := range view().Commands {
				if c.Status != protocol.Applied {
					pending = append(pending, c.ID+" "+c.Type+": "+string(c.Status)+" "+c.Message)
				}
			}
			return len(pending) == 0, strings.Join(pending, "; ")
		})
	})

	// Runtime truth: a pipeline whose request step is a schema-only kind is applied (the
	// Manager writes it) but can never run. The operator blocks the proxy with
	// UnsupportedReference, and the Control Plane shows the deploy's target Degraded with that
	// reason at one of the two heartbeats that follow (the Manager's inventory carries the
	// proxy's phase and Ready reason once the Control Plane announces proxy.status).
	step("schema-only kind reported Degraded", func(t *testing.T) {
		guarded := path("guarded.yaml")
		_ = os.WriteFile(guarded, []byte(`apiVersion: nexo.io/v1alpha1
kind: NexoQueryGuard
metadata: {name: no-scans, namespace: shop}
spec: {maxFilterDepth: 8}
---
apiVersion: nexo.io/v1alpha1
kind: NexoPipeline
metadata: {name: guarded, namespace: shop}
spec:
  router: {kind: NexoRouter, name: by-database}
  request: [{kind: NexoQueryGuard, name: no-scans}]
---
apiVersion: nexo.io/v1alpha1
kind: NexoProxy
metadata: {name: guarded-proxy, namespace: shop}
spec:
  pipelineRef: {name: guarded}
  upstream: {name: primary, address: "mongo-0.mongo.db.svc:27017"}
  profileRef: {name: standard}
  licenseRef: {name: acme}
  replicas: 1
`), 0o644)
		queued := regexp.MustCompile(`queued deploy (\S+)`).FindStringSubmatch(cp("command", "deploy", envID, "-f", guarded, "--namespace", "shop"))
		if queued == nil {
			t.Fatal("deploy of the guarded pipeline printed no command id")
		}
		waitNamed := func(name, what string, ok func(*nexov1alpha1.NexoProxy) bool) {
			t.Helper()
			poll(t, what, time.Minute, func() (bool, string) {
				p := &nexov1alpha1.NexoProxy{}
				if err := k8s.Get(ctx, client.ObjectKey{Namespace: "shop", Name: name}, p); err != nil {
					return false, err.Error()
				}
				return ok(p), fmt.Sprint(p.Status.Phase, p.Status.Conditions)
			})
		}
		waitNamed("guarded-proxy", "the operator blocks the guarded proxy with UnsupportedReference", func(p *nexov1alpha1.NexoProxy) bool {
			c := meta.FindStatusCondition(p.Status.Conditions, nexov1alpha1.ConditionReady)
			return c != nil && c.Reason == nexov1alpha1.ReasonUnsupportedReference
		})
		heartbeats := map[time.Time]bool{}
		var shown controlplane.CommandProxy
		poll(t, "the Control Plane shows the target Degraded/UnsupportedReference", 30*time.Second, func() (bool, string) {
			v := view()
			if v.LastHeartbeat != nil {
				heartbeats[*v.LastHeartbeat] = true
			}
			for _, c := range v.Commands {
				if c.ID == queued[1] && len(c.Proxies) == 1 {
					shown = c.Proxies[0]
				}
			}
			return shown.State == controlplane.ProxyDegraded && shown.Reason == nexov1alpha1.ReasonUnsupportedReference, fmt.Sprintf("%+v", shown)
		})
		// The heartbeat seen when the cluster had blocked the proxy, and at most two more.
		if n := len(heartbeats); n > 3 {
			t.Errorf("the Control Plane showed Degraded/UnsupportedReference after %d heartbeats, want within two", n-1)
		}
		reliabilityreport.Figure(t, "schema-only reference, cluster → Control Plane", fmt.Sprintf("Degraded/UnsupportedReference shown within %d heartbeat(s) of the operator blocking the proxy", len(heartbeats)-1))
	})

	// The alerts and the dashboard (config/monitoring) read series the real binaries export, by
	// the names and labels they use, now that proxies ran, one was blocked, commands were applied
	// and acknowledged. up is Prometheus's own, one per target.
	step("the alerts and the dashboard read real series", func(t *testing.T) {
		names, err := monitoring.Series()
		if err != nil {
			t.Fatal(err)
		}
		operator, manager := scrapeMetrics(t, op.MetricsAddr, scraperToken), scrapeMetrics(t, mgr.MetricsAddr, scraperToken)
		for _, name := range names {
			body, who := operator, "the operator"
			if strings.HasPrefix(name, "nexo_manager_") {
				body, who = manager, "the Manager"
			}
			if name != "up" && !regexp.MustCompile(`(?m)^`+name+`[{ ]`).MatchString(body) {
				t.Errorf("config/monitoring reads %s, which %s does not export", name, who)
			}
		}
		for _, series := range []string{`nexo_proxies{phase="Ready"}`, `nexo_graph_resolution_failures_total{reason="UnsupportedReference"}`, `nexo_manager_condition{condition="Configured",status="true"} 1`} {
			if !strings.Contains(operator+manager, series) {
				t.Errorf("no series %s", series)
			}
		}
	})

	// A project's change lifecycle through stages (changes_test.go).
	changeManagement(changeFlow{cpURL: cpURL, envID: envID, dir: dir, admin: admin, cli: cp, vendorKey: vendorKey, step: step})

	// Leader election: a second operator replica waits; kill -9 the leader and the other takes
	// over within the lease settings, and reconciles (a redeploy becomes Ready).
	step("operator leader election", func(t *testing.T) {
		second = start("nexo-operator", bins["operator"], "--license-public-key="+path("license-authority.pem"))
		leader := func() string {
			l := &coordinationv1.Lease{}
			if err := k8s.Get(ctx, client.ObjectKey{Namespace: testinstall.Namespace, Name: wire.OperatorLeaderElectionID}, l); err != nil || l.Spec.HolderIdentity == nil {
				return ""
			}
			return *l.Spec.HolderIdentity
		}
		first := leader()
		if first == "" {
			t.Fatal("no operator holds the lease")
		}
		killed := time.Now()
		op.Kill()
		poll(t, "the second replica takes the lease", time.Minute, func() (bool, string) {
			h := leader()
			return h != "" && h != first, h
		})
		takeover := time.Since(killed)
		reliabilityreport.Figure(t, "operator leader kill -9, second replica takes over", fmt.Sprintf("%.1fs (lease 15s, renew deadline 10s, retry 2s); the new leader reconciles a redeploy", takeover.Seconds()))
		deploy(1)
		waitProxy(t, "the new leader reconciles a redeploy", func(p *nexov1alpha1.NexoProxy) bool { return p.Status.ReadyReplicas == 1 })
		cp("command", "uninstall", envID, "--proxy", "shop/orders-proxy")
		poll(t, "the proxy is gone again", time.Minute, func() (bool, string) {
			err := k8s.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "orders-proxy"}, &nexov1alpha1.NexoProxy{})
			return apierrors.IsNotFound(err), fmt.Sprint(err)
		})

		// Only the killed operator stopped.
		for name, p := range map[string]*testinstall.LocalPod{"second operator": second, "Manager": mgr} {
			if !p.Running() {
				t.Errorf("the %s exited during the flow", name)
			}
		}
	})

	// Secrets never leak: the connect tokens, the license document, the admin token and the
	// Control Plane's signing key, searched for (plain and base64) in everything the flow
	// produced that people or other tenants can see.
	step("secrets never leak", func(t *testing.T) {
		newToken, _ := os.ReadFile(path("new-token"))
		cpKeyPEM, _ := os.ReadFile(path("cp.key"))
		secrets := map[string]string{"old connect token": strings.TrimSpace(string(oldToken)), "new connect token": strings.TrimSpace(string(newToken)),
			"license document": doc, "admin token": "e2e-admin-token-0123456789", "signing key": pemBody(string(cpKeyPEM))}
		sources := map[string]string{"operator log": op.Logs(), "second operator log": second.Logs(), "Manager log": mgr.Logs(), "Control Plane log": cpLog.String()}
		sources["nexoctl output"] = nexoctlAny(t, dir, "status", "-A") + nexoctlAny(t, dir, "status", "-A", "-o", "json") +
			nexoctlAny(t, dir, "status", "-A", "-o", "yaml") + nexoctlAny(t, dir, "preflight") + nexoctlAny(t, dir, "preflight", "-o", "json") +
			nexoctlAny(t, dir, "version", "-o", "json")
		nexoctlAny(t, dir, "support-bundle", "--file", path("bundle.tar.gz"))
		sources["support bundle"] = archiveText(t, path("bundle.tar.gz"))
		for name, text := range clusterText(t) {
			sources[name] = text
		}
		// The Control Plane's database holds only token hashes, and its signing keys sealed under the
		// key-encryption key kept beside it (docs/controlplane.md, "Signing keys at rest").
		db, _ := os.ReadFile(path("cp.db"))
		wal, _ := os.ReadFile(path("cp.db-wal"))
		hits := 0
		for name, secret := range secrets {
			for source, text := range sources {
				if strings.Contains(text, secret) || strings.Contains(text, base64.StdEncoding.EncodeToString([]byte(secret))) {
					t.Errorf("the %s appears in the %s", name, source)
					hits++
				}
			}
			if bytes.Contains(db, []byte(secret)) || bytes.Contains(wal, []byte(secret)) {
				t.Errorf("the %s appears in the Control Plane's database", name)
				hits++
			}
		}
		reliabilityreport.Figure(t, "secrets searched for (tokens, license, admin token, signing key; plain and base64)", fmt.Sprintf("%d hits for %d secrets in %d sources (debug logs, CLI output, support bundle, Events, ConfigMaps, Nexo objects, Helm records, Control Plane database)", hits, len(secrets), len(sources)+1))
	})
}

// pemBody is the base64 body of a PEM block, joined (what a leak would show).
func pemBody(p string) string {
	var lines []string
	for _, l := range strings.Split(p, "\n") {
		if l != "" && !strings.HasPrefix(l, "-----") {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "")
}

// nexoctlAny runs nexoctl against the cluster and returns its output, whatever the exit code.
func nexoctlAny(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bins["nexoctl"], append(args, "--kubeconfig", cluster.Kubeconfig)...)
	cmd.Dir = dir
	out, _ := cmd.CombinedOutput()
	return string(out)
}

// archiveText is every file of a .tar.gz, concatenated.
func archiveText(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	tr := tar.NewReader(gz)
	for {
		if _, err := tr.Next(); err != nil {
			break
		}
		_, _ = io.Copy(&b, tr)
	}
	return b.String()
}

// clusterText is what the cluster shows besides Secrets: every Event, every ConfigMap, every
// Nexo object with its status, and the Helm release records decoded.
func clusterText(t *testing.T) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	dump := func(name string, list client.ObjectList) {
		if err := k8s.List(ctx, list); err != nil {
			t.Fatal(err)
		}
		raw, _ := json.Marshal(list)
		out[name] = string(raw)
	}
	dump("Events (events.k8s.io)", &eventsv1.EventList{})
	dump("Events (core)", &corev1.EventList{})
	dump("ConfigMaps", &corev1.ConfigMapList{})
	for _, k := range catalog.Kinds {
		l := &unstructured.UnstructuredList{}
		l.SetAPIVersion(catalog.Group + "/" + catalog.Version)
		l.SetKind(k.Kind + "List")
		dump(k.Kind+" objects", l)
	}
	var releases corev1.SecretList
	if err := k8s.List(ctx, &releases, client.MatchingLabels{"owner": "helm"}); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, s := range releases.Items {
		gzipped, err := base64.StdEncoding.DecodeString(string(s.Data["release"]))
		if err != nil {
			t.Fatal(err)
		}
		zr, err := gzip.NewReader(bytes.NewReader(gzipped))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(&b, zr)
	}
	if b.Len() == 0 {
		t.Fatal("no Helm release record to search")
	}
	out["Helm release records"] = b.String()
	return out
}

// installCommand takes the nexoctl line of `controlplane env install-command` as printed (the
// comment after # dropped) and returns its arguments after "nexoctl".
func installCommand(t *testing.T, printed string) []string {
	t.Helper()
	for _, line := range strings.Split(printed, "\n") {
		if strings.HasPrefix(line, "nexoctl install ") {
			line, _, _ = strings.Cut(line, "#")
			return strings.Fields(line)[1:]
		}
	}
	t.Fatalf("no nexoctl install line in:\n%s", printed)
	return nil
}

// trustedKeys are the Control Plane key ids in the trusted-keys Secret.
func trustedKeys(t *testing.T) map[string]bool {
	t.Helper()
	s := &corev1.Secret{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: testinstall.Namespace, Name: "nexo-trusted-keys"}, s); err != nil {
		return map[string]bool{}
	}
	ids := map[string]bool{}
	for name := range s.Data {
		if id, ok := strings.CutPrefix(name, "control-plane-"); ok {
			ids[strings.TrimSuffix(id, ".pem")] = true
		}
	}
	return ids
}

func heartbeatWith(t *testing.T, url, token string) (int, string) {
	t.Helper()
	body, _ := json.Marshal(protocol.Heartbeat{ProtocolVersion: protocol.Version, ClusterID: "probe"})
	req, _ := http.NewRequest("POST", url+"/v1/heartbeat", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b := new(bytes.Buffer)
	_, _ = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String()
}

func waitProxy(t *testing.T, what string, ok func(*nexov1alpha1.NexoProxy) bool) *nexov1alpha1.NexoProxy {
	t.Helper()
	p := &nexov1alpha1.NexoProxy{}
	poll(t, what, 2*time.Minute, func() (bool, string) {
		err := k8s.Get(context.Background(), client.ObjectKey{Namespace: "shop", Name: "orders-proxy"}, p)
		if err != nil {
			return false, err.Error()
		}
		return p.Status.Phase == nexov1alpha1.ProxyReady && ok(p), fmt.Sprintf("phase %s, conditions %v", p.Status.Phase, p.Status.Conditions)
	})
	return p
}

func poll(t *testing.T, what string, timeout time.Duration, f func() (bool, string)) {
	t.Helper()
	last := ""
	if err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		ok, detail := f()
		last = detail
		return ok, nil
	}); err != nil {
		t.Fatalf("%s: not within %s; last: %s", what, timeout, last)
	}
}

// logFile reads a log file on demand.
type logFile string

func (f logFile) String() string {
	b, _ := os.ReadFile(string(f))
	return string(b)
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// teamRoles binds user team-shop to edit and user auditor to view in namespace team, then checks
// as them: edit creates a NexoRateLimit, view lists but cannot create.
func teamRoles(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}}); err != nil {
		t.Fatal(err)
	}
	for user, role := range map[string]string{"team-shop": "edit", "auditor": "view"} {
		rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user, Namespace: "team"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
		if err := k8s.Create(ctx, rb); err != nil {
			t.Fatal(err)
		}
	}
	as := func(user string) client.Client {
		cfg, err := cluster.UserConfig(user)
		if err != nil {
			t.Fatal(err)
		}
		c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	editor, viewer := as("team-shop"), as("auditor")
	rl := func() *nexov1alpha1.NexoRateLimit {
		return &nexov1alpha1.NexoRateLimit{ObjectMeta: metav1.ObjectMeta{Name: "per-client", Namespace: "team"},
			Spec: nexov1alpha1.NexoRateLimitSpec{OperationsPerSecond: 50}}
	}
	poll(t, "an editor creates a NexoRateLimit", time.Minute, func() (bool, string) {
		err := editor.Create(ctx, rl())
		return err == nil, fmt.Sprint(err)
	})
	poll(t, "a viewer lists NexoRateLimits", time.Minute, func() (bool, string) {
		err := viewer.List(ctx, &nexov1alpha1.NexoRateLimitList{}, client.InNamespace("team"))
		return err == nil, fmt.Sprint(err)
	})
	obj := rl()
	obj.Name = "by-viewer"
	if err := viewer.Create(ctx, obj); !apierrors.IsForbidden(err) {
		t.Errorf("a viewer created a NexoRateLimit: %v", err)
	}
}

// authenticatedMetrics: the operator's and the Manager's /metrics (as the chart configures them)
// answer only callers the API server authenticates and authorizes: 401 without a token, 403 for a
// ServiceAccount without the metrics-reader role, and the metrics (each address with a series of
// its own) for Prometheus's ServiceAccount bound to it, whose token it returns.
func authenticatedMetrics(t *testing.T, series map[string]string) string {
	t.Helper()
	ctx := context.Background()
	if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "monitoring"}}); err != nil {
		t.Fatal(err)
	}
	tokenOf := func(sa string) string {
		if err := k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: "monitoring"}}); err != nil {
			t.Fatal(err)
		}
		cfg, err := cluster.ServiceAccountConfig(ctx, "monitoring", sa)
		if err != nil {
			t.Fatal(err)
		}
		return cfg.BearerToken
	}
	stranger, prometheus := tokenOf("stranger"), tokenOf("prometheus")
	if err := k8s.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "prometheus-nexo-metrics"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "nexo-operator-metrics-reader-" + testinstall.Namespace},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "prometheus", Namespace: "monitoring"}}}); err != nil {
		t.Fatal(err)
	}
	for addr, want := range series {
		get := func(token string) (int, string) { return getMetrics(addr, token) }
		// The metrics server listens a little after /readyz answers (it makes its self-signed
		// certificate first): wait for it to answer at all before judging what it answers.
		poll(t, addr+"/metrics listens", 30*time.Second, func() (bool, string) {
			code, msg := get("")
			return code != 0, msg
		})
		if code, _ := get(""); code != http.StatusUnauthorized {
			t.Errorf("%s/metrics without a token: %d, want 401", addr, code)
		}
		if code, _ := get(stranger); code != http.StatusForbidden {
			t.Errorf("%s/metrics as a ServiceAccount without the reader role: %d, want 403", addr, code)
		}
		poll(t, "Prometheus's ServiceAccount reads "+addr+"/metrics", 30*time.Second, func() (bool, string) {
			code, body := get(prometheus)
			return code == http.StatusOK && strings.Contains(body, want), fmt.Sprint(code)
		})
	}
	return prometheus
}

// getMetrics is GET https://addr/metrics with token ("": none): the status code and the body,
// or 0 and the error.
func getMetrics(addr, token string) (int, string) {
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} // self-signed
	req, _ := http.NewRequest("GET", "https://"+addr+"/metrics", nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b := new(bytes.Buffer)
	_, _ = b.ReadFrom(resp.Body)
	return resp.StatusCode, b.String()
}

// scrapeMetrics is addr's /metrics, read with token.
func scrapeMetrics(t *testing.T, addr, token string) string {
	t.Helper()
	code, body := getMetrics(addr, token)
	if code != http.StatusOK {
		t.Fatalf("scrape %s: %d %s", addr, code, body)
	}
	return body
}
