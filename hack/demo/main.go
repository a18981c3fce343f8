// Command nexo-demo runs the whole of Nexo Edge on loopback for `make demo`:
//
//	nexo-demo run   --dir .demo [--existing]   supervise: start everything, then wait for SIGTERM
//	nexo-demo check --dir .demo                assert on nexoctl status/preflight -o json (CI)
//
// run writes progress lines to DIR/progress, DIR/ready when the demo is up, or DIR/failed (the
// step and the tail of the component's log) after stopping everything it started. Every process
// it starts dies with it; `make demo-down` stops it by pid.
package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/nexo-io/nexo-edge/controlplane/storage"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/catalog"
	"github.com/nexo-io/nexo-edge/contract/license"
	"github.com/nexo-io/nexo-edge/contract/protocol"
	"github.com/nexo-io/nexo-edge/contract/scheme"
	"github.com/nexo-io/nexo-edge/contract/signature"
	"github.com/nexo-io/nexo-edge/controlplane"
	"github.com/nexo-io/nexo-edge/test/framework/testcluster"
	"github.com/nexo-io/nexo-edge/test/framework/testinstall"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: nexo-demo run|check --dir DIR [--existing]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	dir := fs.String("dir", ".demo", "state folder")
	existing := fs.Bool("existing", false, "use the cluster of $KUBECONFIG instead of starting one")
	bin := fs.String("bin", "bin", "folder of the built binaries")
	_ = fs.Parse(os.Args[2:])
	abs, _ := filepath.Abs(*dir)
	binAbs, _ := filepath.Abs(*bin)
	var err error
	switch os.Args[1] {
	case "run":
		err = (&demo{dir: abs, bin: binAbs, existing: *existing}).run()
	case "check":
		err = check(abs, binAbs)
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "nexo-demo:", err)
		os.Exit(1)
	}
}

// demo is one demo run: what it started (to stop it) and what the later steps need of the
// earlier ones.
type demo struct {
	dir, bin string
	existing bool
	cluster  *testcluster.Cluster
	cpServer *http.Server
	cpStore  *storage.Store
	pods     []*testinstall.LocalPod
	logs     map[string]string

	kubeconfig string
	cfg        *rest.Config
	k8s        client.Client
	cpURL      string
	adminToken string
	envID      string
	vendorKey  ed25519.PrivateKey
}

func (d *demo) path(name string) string { return filepath.Join(d.dir, name) }

func (d *demo) progress(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	f, err := os.OpenFile(d.path("progress"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err == nil {
		fmt.Fprintln(f, line)
		f.Close()
	}
}

// stepErr names the failing step and the component whose log explains it.
type stepErr struct {
	step, component string
	err             error
}

func (e *stepErr) Error() string { return e.step + ": " + e.err.Error() }

func (d *demo) run() error {
	if err := os.MkdirAll(d.dir, 0o755); err != nil {
		return err
	}
	d.logs = map[string]string{}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	err := d.up(ctx)
	if err != nil {
		var se *stepErr
		msg := err.Error()
		if errors.As(err, &se) && d.logs[se.component] != "" {
			msg += "\n--- last lines of " + se.component + " (" + d.logs[se.component] + ") ---\n" + testcluster.Tail(d.logs[se.component], 25)
		}
		d.teardown()
		_ = os.WriteFile(d.path("failed"), []byte(msg+"\n"), 0o644)
		return err
	}
	_ = os.WriteFile(d.path("ready"), []byte(time.Now().UTC().Format(time.RFC3339)+"\n"), 0o644)
	<-ctx.Done()
	d.teardown()
	return nil
}

func (d *demo) teardown() {
	for i := len(d.pods) - 1; i >= 0; i-- {
		d.pods[i].Stop()
	}
	if d.cpServer != nil {
		_ = d.cpServer.Close()
	}
	if d.cpStore != nil {
		_ = d.cpStore.Close()
	}
	if d.cluster != nil {
		_ = d.cluster.Stop()
	}
}

func freePort() int {
	p, _ := testcluster.FreePort()
	return p
}

func (d *demo) appendPid(name string, pid int) {
	f, err := os.OpenFile(d.path("pids"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err == nil {
		fmt.Fprintf(f, "%d %s\n", pid, name)
		f.Close()
	}
}

// up takes the hosted path a user takes, step by step; a failing step names itself and the
// component whose log explains it.
func (d *demo) up(ctx context.Context) error {
	for _, step := range []func(context.Context) error{
		d.startCluster,
		d.startControlPlane,
		d.installFromControlPlane,
		d.runProduct,
		d.deployFromControlPlane,
		d.applyLegacyProxy,
		d.waitForProxies,
	} {
		if err := step(ctx); err != nil {
			return err
		}
	}
	d.progress("✔ Nexo Edge is running")
	return nil
}

// startCluster starts the local cluster, or takes the one of KUBECONFIG (CLUSTER=existing), and
// connects to it.
func (d *demo) startCluster(ctx context.Context) error {
	d.kubeconfig = d.path("kubeconfig")
	if d.existing {
		src := os.Getenv("KUBECONFIG")
		if src == "" {
			return &stepErr{step: "use the existing cluster", err: errors.New("CLUSTER=existing needs KUBECONFIG set explicitly")}
		}
		d.progress("▸ using the existing cluster of KUBECONFIG=%s", src)
		raw, err := os.ReadFile(src)
		if err != nil {
			return &stepErr{step: "use the existing cluster", err: err}
		}
		_ = os.WriteFile(d.kubeconfig, raw, 0o600)
		if d.cfg, err = clientcmd.BuildConfigFromFlags("", d.kubeconfig); err != nil {
			return &stepErr{step: "use the existing cluster", err: err}
		}
	} else {
		d.progress("▸ starting the local cluster: etcd, kube-apiserver, controller-manager, scheduler, kwok with 3 nodes")
		c, err := testcluster.Start(ctx, testcluster.Options{Mode: testcluster.Full, Dir: d.path("cluster"), Nodes: []testcluster.Node{
			{Name: "edge-a", Region: "eu-west-1", Zone: "eu-west-1a"},
			{Name: "edge-b", Region: "eu-west-1", Zone: "eu-west-1b"},
			{Name: "edge-c", Region: "eu-west-1", Zone: "eu-west-1c"},
		}})
		if err != nil {
			return &stepErr{step: "start the local cluster", err: err}
		}
		d.cluster, d.cfg = c, c.Config
		for _, pid := range c.Pids() {
			d.appendPid("cluster-component", pid)
		}
		raw, _ := os.ReadFile(c.Kubeconfig)
		_ = os.WriteFile(d.kubeconfig, raw, 0o600)
	}
	scheme := scheme.New()
	_ = apiextensionsv1.AddToScheme(scheme)
	var err error
	if d.k8s, err = client.New(d.cfg, client.Options{Scheme: scheme}); err != nil {
		return &stepErr{step: "connect to the cluster", err: err}
	}
	return nil
}

// startControlPlane serves the reference Control Plane on loopback and registers the demo
// environment; its connect token goes where the install command expects it.
func (d *demo) startControlPlane(context.Context) error {
	d.progress("▸ starting the reference Control Plane and registering the demo environment")
	_, cpKey, _ := ed25519.GenerateKey(rand.Reader) // the first signing key (controlplane serve --signing-key); Managers learn it over the channel
	var err error
	// A fresh Control Plane each run: its first signing key (and the audit checkpoint it signs) is
	// new, so an earlier run's database would not verify against it.
	for _, f := range []string{"controlplane.db", "controlplane.db-wal", "controlplane.db-shm", "controlplane.db.kek", "controlplane.db.audit-checkpoint"} {
		_ = os.Remove(d.path(f))
	}
	if d.cpStore, err = storage.Open(d.path("controlplane.db")); err != nil {
		return &stepErr{step: "start the Control Plane", err: err}
	}
	d.adminToken = randomHex(16) // independent of the signing key
	cpAddr := fmt.Sprintf("127.0.0.1:%d", freePort())
	// Kept in a file (0600) so the admin commands the demo prints for exploring work as printed.
	if err := os.WriteFile(d.path("admin-token"), []byte(d.adminToken), 0o600); err != nil {
		return err
	}
	kek, _, err := controlplane.LoadKeyEncryptionKey(d.path("controlplane.db.kek"), true) // seals the signing keys the database holds
	if err != nil {
		return &stepErr{step: "start the Control Plane", err: err}
	}
	cpSrv, err := controlplane.New(context.Background(), controlplane.Config{Store: d.cpStore, Key: cpKey, AdminToken: d.adminToken, NextHeartbeat: 5 * time.Second, PublicURL: "http://" + cpAddr,
		KeyEncryption: kek, Checkpoint: &controlplane.Checkpoint{Path: d.path("controlplane.db.audit-checkpoint"), Key: cpKey}})
	if err != nil {
		return &stepErr{step: "start the Control Plane", err: err}
	}
	lis, err := net.Listen("tcp", cpAddr)
	if err != nil {
		return &stepErr{step: "start the Control Plane", err: err}
	}
	d.cpServer = controlplane.NewHTTPServer("", cpSrv.Handler())
	go func() { _ = d.cpServer.Serve(lis) }()
	d.cpURL = "http://" + cpAddr
	env, err := registerEnvironment(d.cpURL, d.adminToken)
	if err != nil {
		return &stepErr{step: "register the demo environment", err: err}
	}
	d.envID = env.ID
	// The token goes where the install command expects it: ./connect-token, from the demo folder.
	if err := os.WriteFile(d.path("connect-token"), []byte(env.Token), 0o600); err != nil {
		return err
	}
	_ = os.WriteFile(d.path("controlplane.json"), []byte(fmt.Sprintf(`{"url":%q,"environment":%q}`+"\n", d.cpURL, env.ID)), 0o644)
	return nil
}

// installFromControlPlane runs the install command the Control Plane prints for the environment
// (nexoctl install, the real Helm SDK install), plus the demo's own choices.
func (d *demo) installFromControlPlane(ctx context.Context) error {
	var ic controlplane.InstallCommand
	if err := (controlplane.AdminClient{URL: d.cpURL, Token: d.adminToken}).Do("GET", "/admin/environments/"+d.envID+"/install", nil, &ic); err != nil {
		return &stepErr{step: "the Control Plane's install command", err: err}
	}
	line, _, _ := strings.Cut(ic.Nexoctl, "#")
	args := strings.Fields(line)[1:]
	// The user's own choices on top of the printed command: a registry credential for the
	// profile's imagePullSecrets, the namespace its copies may go to, and waiting.
	_ = os.WriteFile(d.path("registry.dockerconfigjson"), []byte(`{"auths":{"registry.example.com":{"auth":"ZGVtbzpkZW1v"}}}`), 0o600)
	args = append(args, "--registry-secret", "nexo-registry="+d.path("registry.dockerconfigjson"),
		"--set", "operator.secretCopyNamespaces={shop}", "--set", "manager.deployNamespaces={shop}",
		"--set", "manager.allowedImageRepositories={registry.example.com/nexo/proxy}", "--wait", "--timeout", "3m", "--kubeconfig", d.kubeconfig)
	d.progress("▸ %s (the Control Plane's install command) --registry-secret … --set operator.secretCopyNamespaces={shop} --set manager.deployNamespaces={shop} --set manager.allowedImageRepositories={registry.example.com/nexo/proxy} --wait", strings.TrimSpace(line))
	if err := d.k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}); err != nil && !strings.Contains(err.Error(), "already exists") {
		return &stepErr{step: "create namespace shop", err: err}
	}
	install := exec.CommandContext(ctx, filepath.Join(d.bin, "nexoctl"), args...)
	install.Dir = d.dir
	out, err := install.CombinedOutput()
	_ = os.WriteFile(d.path("nexoctl-install.log"), out, 0o644)
	d.logs["nexoctl-install"] = d.path("nexoctl-install.log")
	if err != nil {
		return &stepErr{step: "nexoctl install", component: "nexoctl-install", err: err}
	}
	if err := testinstall.WaitCRDsServed(ctx, d.cfg, len(catalog.Kinds), time.Minute); err != nil {
		return &stepErr{step: "the chart's CRDs are served", err: err}
	}
	return nil
}

// runProduct runs the operator and the Manager from the Deployments the chart installed: their
// own args, env and mounted Secrets (LocalPod), authenticated as their ServiceAccounts, so the
// product's RBAC decides what they may do. The one addition is the demo's license authority: a
// demo cannot hold the vendor's license-signing key.
func (d *demo) runProduct(ctx context.Context) error {
	d.progress("▸ running nexo-operator and nexo-manager from the installed Deployments (local processes, as the chart's ServiceAccounts)")
	vendorPub, vendorKey, _ := ed25519.GenerateKey(rand.Reader)
	d.vendorKey = vendorKey
	_ = os.WriteFile(d.path("license-vendor.pem"), signature.MarshalPublicKey(vendorPub), 0o644)
	for _, p := range []struct {
		name, component, binary string
		extra                   []string
	}{
		{"nexo-operator", "operator", "operator", []string{"--license-public-key=" + d.path("license-vendor.pem")}},
		{"nexo-manager", "manager", "manager", nil},
	} {
		podDir := d.path(p.component)
		_ = os.MkdirAll(podDir, 0o700)
		pod, err := testinstall.RunDeployment(ctx, d.cfg, "nexo-system", p.name, testinstall.PodOptions{
			Dir: podDir, Binary: filepath.Join(d.bin, p.binary), ExtraArgs: p.extra, LogPath: d.path(p.component + ".log")})
		if err != nil {
			return &stepErr{step: "start " + p.name, err: err}
		}
		d.pods = append(d.pods, pod)
		d.logs[p.component] = pod.LogPath
		d.appendPid(p.component, pod.Pid())
		if err := pod.WaitReady(ctx, time.Minute); err != nil {
			return &stepErr{step: p.name + " ready", component: p.component, err: err}
		}
	}
	return nil
}

// deployFromControlPlane prepares namespace shop (license, salt) and queues the signed deploy of
// orders-proxy on the Control Plane; the Manager applies it.
func (d *demo) deployFromControlPlane(ctx context.Context) error {
	d.progress("▸ deploy from the Control Plane: orders-proxy (router, tenant isolation, PII masking, connection pool, metrics; profile; license) into namespace shop")
	doc, _ := license.Issue(license.Claims{Licensee: "Acme Corp", ExpiresAt: time.Now().Add(30 * 24 * time.Hour),
		Entitlements: []string{"NexoTenantIsolation", "NexoPIIMasking", "NexoConnectionPool"}, MaxProxies: 5}, d.vendorKey)
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "acme-license", Namespace: "shop"}, Data: map[string][]byte{"license": []byte(doc)}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "pii-salt", Namespace: "shop"}, Data: map[string][]byte{"salt": []byte("demo-salt")}},
	} {
		if err := d.k8s.Create(ctx, o); err != nil && !strings.Contains(err.Error(), "already exists") {
			return &stepErr{step: "prepare namespace shop", err: err}
		}
	}
	manifests, err := demoGraph()
	if err != nil {
		return &stepErr{step: "build the demo graph", err: err}
	}
	if err := enqueue(d.cpURL, d.adminToken, d.envID, protocol.Command{Type: protocol.Deploy, Namespaces: []string{"shop"}, Manifests: manifests}); err != nil {
		return &stepErr{step: "queue the deploy command", err: err}
	}
	return nil
}

// applyLegacyProxy applies legacy-proxy directly; its pipeline references a schema-only kind.
func (d *demo) applyLegacyProxy(ctx context.Context) error {
	d.progress("▸ applying legacy-proxy directly: its pipeline references NexoQueryGuard, a schema-only kind")
	for _, y := range legacyGraph {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON([]byte(y)); err != nil {
			return err
		}
		if err := d.k8s.Create(ctx, u); err != nil && !strings.Contains(err.Error(), "already exists") {
			return &stepErr{step: "apply legacy-proxy", err: err}
		}
	}
	return nil
}

// waitForProxies waits until orders-proxy is Ready and legacy-proxy reports
// UnsupportedReference.
func (d *demo) waitForProxies(ctx context.Context) error {
	d.progress("▸ waiting for orders-proxy Ready and legacy-proxy UnsupportedReference")
	deadline := time.Now().Add(3 * time.Minute)
	for {
		orders, legacy := &nexov1alpha1.NexoProxy{}, &nexov1alpha1.NexoProxy{}
		errO := d.k8s.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "orders-proxy"}, orders)
		errL := d.k8s.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "legacy-proxy"}, legacy)
		c := meta.FindStatusCondition(legacy.Status.Conditions, "Ready")
		ordersUp := orders.Status.Phase == nexov1alpha1.ProxyReady ||
			// On an existing cluster the example images cannot run: the workload is applied and rolling.
			d.existing && orders.Status.Phase == nexov1alpha1.ProxyProgressing
		if errO == nil && errL == nil && ordersUp && c != nil && c.Reason == "UnsupportedReference" {
			if orders.Status.Phase != nexov1alpha1.ProxyReady {
				d.progress("  orders-proxy is applied but its pods cannot start here: the example images (registry.example.com) are not pullable on a real cluster")
			}
			return nil
		}
		if time.Now().After(deadline) {
			return &stepErr{step: "wait for the proxies", component: "operator", err: fmt.Errorf("orders-proxy phase %q, legacy-proxy %v", orders.Status.Phase, c)}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

func registerEnvironment(url, admin string) (controlplane.NewEnvironment, error) {
	var env controlplane.NewEnvironment
	return env, controlplane.AdminClient{URL: url, Token: admin}.Do("POST", "/admin/environments", map[string]string{"name": "demo"}, &env)
}

func enqueue(url, admin, envID string, c protocol.Command) error {
	return controlplane.AdminClient{URL: url, Token: admin}.Do("POST", "/admin/environments/"+envID+"/commands", c, nil)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
