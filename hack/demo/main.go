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

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/controlplane"
	"github.com/nexo-io/nexo-edge/internal/operator"
	"github.com/nexo-io/nexo-edge/internal/testcluster"
	"github.com/nexo-io/nexo-edge/license"
	"github.com/nexo-io/nexo-edge/protocol"
	"github.com/nexo-io/nexo-edge/render"
	"github.com/nexo-io/nexo-edge/signature"
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

type demo struct {
	dir, bin string
	existing bool
	cluster  *testcluster.Cluster
	cpServer *http.Server
	cpStore  *controlplane.Store
	procs    []*exec.Cmd
	logs     map[string]string
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
	for i := len(d.procs) - 1; i >= 0; i-- {
		p := d.procs[i]
		_ = p.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = p.Process.Kill()
		}
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

// start launches a binary in the background, logging to DIR/NAME.log; it dies with the supervisor.
func (d *demo) start(name string, env []string, args ...string) (*exec.Cmd, error) {
	logPath := d.path(name + ".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(filepath.Join(d.bin, name), args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	d.logs[name] = logPath
	d.procs = append(d.procs, cmd)
	d.appendPid(name, cmd.Process.Pid)
	return cmd, nil
}

func (d *demo) appendPid(name string, pid int) {
	f, err := os.OpenFile(d.path("pids"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err == nil {
		fmt.Fprintf(f, "%d %s\n", pid, name)
		f.Close()
	}
}

func waitHTTP(ctx context.Context, url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %s", url, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(300 * time.Millisecond):
		}
	}
}

func (d *demo) up(ctx context.Context) error {
	var cfg *rest.Config
	kubeconfig := d.path("kubeconfig")
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
		_ = os.WriteFile(kubeconfig, raw, 0o600)
		if cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig); err != nil {
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
		d.cluster, cfg = c, c.Config
		for _, pid := range c.Pids() {
			d.appendPid("cluster-component", pid)
		}
		raw, _ := os.ReadFile(c.Kubeconfig)
		_ = os.WriteFile(kubeconfig, raw, 0o600)
	}
	scheme := operator.Scheme()
	_ = apiextensionsv1.AddToScheme(scheme)
	k8s, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return &stepErr{step: "connect to the cluster", err: err}
	}

	d.progress("▸ starting the reference Control Plane and registering the demo environment")
	cpPub, cpKey, _ := ed25519.GenerateKey(rand.Reader)
	if d.cpStore, err = controlplane.Open(d.path("controlplane.db")); err != nil {
		return &stepErr{step: "start the Control Plane", err: err}
	}
	adminToken := randomHex(16) // independent of the signing key
	cpAddr := fmt.Sprintf("127.0.0.1:%d", freePort())
	// Kept in a file (0600) so the admin commands the demo prints for exploring work as printed.
	if err := os.WriteFile(d.path("admin-token"), []byte(adminToken), 0o600); err != nil {
		return err
	}
	cpSrv := &controlplane.Server{Store: d.cpStore, Key: cpKey, AdminToken: adminToken, NextHeartbeat: 5 * time.Second, PublicURL: "http://" + cpAddr}
	lis, err := net.Listen("tcp", cpAddr)
	if err != nil {
		return &stepErr{step: "start the Control Plane", err: err}
	}
	d.cpServer = controlplane.NewHTTPServer("", cpSrv.Handler())
	go func() { _ = d.cpServer.Serve(lis) }()
	cpURL := "http://" + cpAddr
	env, err := registerEnvironment(cpURL, adminToken)
	if err != nil {
		return &stepErr{step: "register the demo environment", err: err}
	}
	tokenFile := d.path("connect-token")
	if err := os.WriteFile(tokenFile, []byte(env.Token), 0o600); err != nil {
		return err
	}
	_ = os.MkdirAll(d.path("trusted-keys"), 0o755)
	_ = os.WriteFile(d.path("trusted-keys/controlplane.pem"), signature.MarshalPublicKey(cpPub), 0o644)
	_ = os.WriteFile(d.path("controlplane.json"), []byte(fmt.Sprintf(`{"url":%q,"environment":%q}`+"\n", cpURL, env.ID)), 0o644)

	d.progress("▸ nexoctl install --token-file %s (Helm SDK, the chart embedded in nexoctl)", tokenFile)
	if err := trustKey(ctx, k8s, cpPub); err != nil {
		return &stepErr{step: "trust the Control Plane key", err: err}
	}
	for _, o := range []client.Object{
		// The proxies' namespace: the chart binds the operator's pull-Secret copy rights there.
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}},
		// A registry credential marked shareable, as `nexoctl install --registry-secret` does.
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "nexo-registry", Namespace: "nexo-system", Labels: map[string]string{render.RegistryCredentialLabel: "true"}}, Type: corev1.SecretTypeDockerConfigJson,
			Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"registry.example.com":{"auth":"ZGVtbzpkZW1v"}}}`)}},
	} {
		if err := k8s.Create(ctx, o); err != nil && !strings.Contains(err.Error(), "already exists") {
			return &stepErr{step: "prepare nexo-system", err: err}
		}
	}
	install := exec.CommandContext(ctx, filepath.Join(d.bin, "nexoctl"), "install", "--kubeconfig", kubeconfig, "--token-file", tokenFile, "--control-plane-url", cpURL,
		"--set", "operator.secretCopyNamespaces={shop}", "--wait", "--timeout", "3m")
	out, err := install.CombinedOutput()
	_ = os.WriteFile(d.path("nexoctl-install.log"), out, 0o644)
	d.logs["nexoctl-install"] = d.path("nexoctl-install.log")
	if err != nil {
		return &stepErr{step: "nexoctl install", component: "nexoctl-install", err: err}
	}

	d.progress("▸ starting nexo-operator and nexo-manager as local processes")
	vendorPub, vendorKey, _ := ed25519.GenerateKey(rand.Reader)
	_ = os.WriteFile(d.path("license-vendor.pem"), signature.MarshalPublicKey(vendorPub), 0o644)
	// Both run as the chart's own ServiceAccounts (TokenRequest tokens): the product's RBAC, not
	// the admin's, decides what they may do.
	asSA := func(name string) ([]string, error) {
		saCfg, err := testcluster.ServiceAccountConfig(ctx, cfg, "nexo-system", name)
		if err != nil {
			return nil, err
		}
		path := d.path("kubeconfig-" + name)
		return []string{"KUBECONFIG=" + path}, testcluster.WriteKubeconfig(path, name, saCfg)
	}
	opEnv, err := asSA("nexo-operator")
	if err != nil {
		return &stepErr{step: "token for the nexo-operator ServiceAccount", err: err}
	}
	mgrEnv, err := asSA("nexo-manager")
	if err != nil {
		return &stepErr{step: "token for the nexo-manager ServiceAccount", err: err}
	}
	opProbe, mgrProbe := freePort(), freePort()
	// Leader election as in production: on a cluster that already runs an operator, this one waits.
	if _, err := d.start("operator", opEnv, "--leader-elect", "--operator-namespace=nexo-system", "--environment-id="+env.ID, "--license-public-key="+d.path("license-vendor.pem"),
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", freePort()), fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", opProbe)); err != nil {
		return &stepErr{step: "start nexo-operator", err: err}
	}
	if _, err := d.start("manager", mgrEnv, "--token-file="+tokenFile, "--control-plane-url="+cpURL, "--trusted-keys-dir="+d.path("trusted-keys"),
		"--namespace=nexo-system", "--proxy-image=registry.example.com/nexo/proxy:0.2.0",
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", freePort()), fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", mgrProbe)); err != nil {
		return &stepErr{step: "start nexo-manager", err: err}
	}
	if err := waitHTTP(ctx, fmt.Sprintf("http://127.0.0.1:%d/readyz", opProbe), time.Minute); err != nil {
		return &stepErr{step: "nexo-operator ready", component: "operator", err: err}
	}
	if err := waitHTTP(ctx, fmt.Sprintf("http://127.0.0.1:%d/readyz", mgrProbe), time.Minute); err != nil {
		return &stepErr{step: "nexo-manager's first heartbeat", component: "manager", err: err}
	}

	d.progress("▸ deploy from the Control Plane: orders-proxy (router, tenant isolation, PII masking, connection pool, metrics; profile; license) into namespace shop")
	doc, _ := license.Issue(license.Claims{Licensee: "Acme Corp", ExpiresAt: time.Now().Add(30 * 24 * time.Hour),
		Entitlements: []string{"NexoTenantIsolation", "NexoPIIMasking", "NexoConnectionPool"}, MaxProxies: 5}, vendorKey)
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "acme-license", Namespace: "shop"}, Data: map[string][]byte{"license": []byte(doc)}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "pii-salt", Namespace: "shop"}, Data: map[string][]byte{"salt": []byte("demo-salt")}},
	} {
		if err := k8s.Create(ctx, o); err != nil && !strings.Contains(err.Error(), "already exists") {
			return &stepErr{step: "prepare namespace shop", err: err}
		}
	}
	manifests, err := demoGraph()
	if err != nil {
		return &stepErr{step: "build the demo graph", err: err}
	}
	if err := enqueue(cpURL, adminToken, env.ID, protocol.Command{Type: protocol.Deploy, Namespaces: []string{"shop"}, Manifests: manifests}); err != nil {
		return &stepErr{step: "queue the deploy command", err: err}
	}

	d.progress("▸ applying legacy-proxy directly: its pipeline references NexoQueryGuard, a schema-only kind")
	for _, y := range legacyGraph {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON([]byte(y)); err != nil {
			return err
		}
		if err := k8s.Create(ctx, u); err != nil && !strings.Contains(err.Error(), "already exists") {
			return &stepErr{step: "apply legacy-proxy", err: err}
		}
	}

	d.progress("▸ waiting for orders-proxy Ready and legacy-proxy UnsupportedReference")
	deadline := time.Now().Add(3 * time.Minute)
	for {
		orders, legacy := &nexov1alpha1.NexoProxy{}, &nexov1alpha1.NexoProxy{}
		errO := k8s.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "orders-proxy"}, orders)
		errL := k8s.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "legacy-proxy"}, legacy)
		c := meta.FindStatusCondition(legacy.Status.Conditions, "Ready")
		ordersUp := orders.Status.Phase == nexov1alpha1.ProxyReady ||
			// On an existing cluster the example images cannot run: the workload is applied and rolling.
			d.existing && orders.Status.Phase == nexov1alpha1.ProxyProgressing
		if errO == nil && errL == nil && ordersUp && c != nil && c.Reason == "UnsupportedReference" {
			if orders.Status.Phase != nexov1alpha1.ProxyReady {
				d.progress("  orders-proxy is applied but its pods cannot start here: the example images (registry.example.com) are not pullable on a real cluster")
			}
			break
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
	d.progress("✔ Nexo Edge is running")
	return nil
}

func registerEnvironment(url, admin string) (controlplane.NewEnvironment, error) {
	var env controlplane.NewEnvironment
	return env, controlplane.AdminClient{URL: url, Token: admin}.Do("POST", "/admin/environments", map[string]string{"name": "demo"}, &env)
}

func enqueue(url, admin, envID string, c protocol.Command) error {
	return controlplane.AdminClient{URL: url, Token: admin}.Do("POST", "/admin/environments/"+envID+"/commands", c, nil)
}

// trustKey adds the demo Control Plane's public key to the operator's trusted-keys Secret,
// creating the namespace and the Secret when needed and keeping the keys already there.
func trustKey(ctx context.Context, k8s client.Client, pub ed25519.PublicKey) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "nexo-system", Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}}
	if err := k8s.Create(ctx, ns); err != nil && !strings.Contains(err.Error(), "already exists") {
		return err
	}
	entry := "demo-controlplane-" + signature.KeyID(pub) + ".pem"
	sec := &corev1.Secret{}
	err := k8s.Get(ctx, client.ObjectKey{Namespace: "nexo-system", Name: "nexo-trusted-keys"}, sec)
	if err != nil {
		sec = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "nexo-trusted-keys", Namespace: "nexo-system"}, Data: map[string][]byte{entry: signature.MarshalPublicKey(pub)}}
		return k8s.Create(ctx, sec)
	}
	if sec.Data == nil {
		sec.Data = map[string][]byte{}
	}
	sec.Data[entry] = signature.MarshalPublicKey(pub)
	return k8s.Update(ctx, sec)
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
