package reliability_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/nexo-io/nexo-edge/contract/wire"
	"github.com/nexo-io/nexo-edge/controlplane"
	"github.com/nexo-io/nexo-edge/test/framework/testcluster"
	"github.com/nexo-io/nexo-edge/test/framework/testinstall"
)

const adminToken = "reliability-admin-token-0123456789"

// controlPlaneProcess is the reference Control Plane (cmd/controlplane serve) with its database.
type controlPlaneProcess struct {
	dir, addr, db string
	cmd           *exec.Cmd
	log           string
}

func startControlPlane(t *testing.T) *controlPlaneProcess {
	t.Helper()
	dir := t.TempDir()
	port, _ := testcluster.FreePort()
	cp := &controlPlaneProcess{dir: dir, addr: fmt.Sprintf("127.0.0.1:%d", port), db: filepath.Join(dir, "cp.db"), log: filepath.Join(dir, "controlplane.log")}
	if out, err := exec.Command(bins["controlplane"], "keygen", "--out", filepath.Join(dir, "cp.key")).CombinedOutput(); err != nil {
		t.Fatalf("keygen: %v\n%s", err, out)
	}
	must(t, os.WriteFile(filepath.Join(dir, "admin-token"), []byte(adminToken), 0o600))
	cp.start(t)
	t.Cleanup(cp.stop)
	return cp
}

func (cp *controlPlaneProcess) url() string { return "http://" + cp.addr }

// start serves from the database file (a restart keeps the data unless the file was removed).
func (cp *controlPlaneProcess) start(t *testing.T) {
	t.Helper()
	f, err := os.OpenFile(cp.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	must(t, err)
	cp.cmd = exec.Command(bins["controlplane"], cp.serveArgs()...)
	cp.cmd.Stdout, cp.cmd.Stderr = f, f
	must(t, cp.cmd.Start())
	admin := cp.admin()
	if err := waitUntil(30*time.Second, func() bool { return admin.Do("GET", "/admin/environments", nil, nil) == nil }); err != nil {
		t.Fatalf("the Control Plane does not answer: %v\n%s", err, testcluster.Tail(cp.log, 20))
	}
}

// serveArgs are the arguments of controlplane serve for this Control Plane.
func (cp *controlPlaneProcess) serveArgs() []string {
	return []string{"serve", "--db", cp.db, "--listen", cp.addr,
		"--signing-key", filepath.Join(cp.dir, "cp.key"), "--admin-token-file", filepath.Join(cp.dir, "admin-token"), "--heartbeat-interval", "1s"}
}

func (cp *controlPlaneProcess) stop() {
	if cp.cmd != nil && cp.cmd.Process != nil {
		_ = cp.cmd.Process.Kill()
		_ = cp.cmd.Wait()
	}
}

func (cp *controlPlaneProcess) admin() controlplane.AdminClient {
	return controlplane.AdminClient{URL: cp.url(), Token: adminToken}
}

// cli runs an admin command of cmd/controlplane.
func (cp *controlPlaneProcess) cli(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(bins["controlplane"], append([]string{"--server", cp.url(), "--admin-token-file", filepath.Join(cp.dir, "admin-token")}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("controlplane %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// createEnvironment registers an environment and returns its id and connect token.
func (cp *controlPlaneProcess) createEnvironment(t *testing.T, name string) (string, string) {
	t.Helper()
	tokenFile := filepath.Join(cp.dir, name+".token")
	out := cp.cli(t, "env", "create", name, "--token-out", tokenFile)
	m := regexp.MustCompile(`environment (\S+) `).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("env create: %s", out)
	}
	token, err := os.ReadFile(tokenFile)
	must(t, err)
	return m[1], strings.TrimSpace(string(token))
}

func (cp *controlPlaneProcess) view(t *testing.T, env string) controlplane.EnvironmentView {
	t.Helper()
	var v controlplane.EnvironmentView
	must(t, cp.admin().Do("GET", "/admin/environments/"+env, nil, &v))
	return v
}

// hosted is the product installed for a Control Plane environment: the chart with the Manager
// pointed at managerURL (the Control Plane, or a fault proxy in front of it) and the connect
// token Secret nexoctl install creates.
func hosted(t *testing.T, cp *controlPlaneProcess, managerURL string, watch []string, maxProxies int, opts testcluster.Options) (*product, string) {
	t.Helper()
	env, token := cp.createEnvironment(t, "reliability")
	p := installFor(t, env, watch, maxProxies, opts, map[string]any{"manager": map[string]any{"controlPlaneURL": managerURL}})
	must(t, p.admin.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: wire.ConnectTokenSecret, Namespace: testinstall.Namespace},
		Data: map[string][]byte{"token": []byte(token)}}))
	return p, env
}

// deployGraph is what the Control Plane deploys in the hosted suites: a profile, a router, the
// customer's license and one proxy in ns.
func deployGraph(ns, proxy string) string {
	return strings.NewReplacer("NS", ns, "PROXY", proxy).Replace(`apiVersion: nexo.io/v1alpha1
kind: NexoDeploymentProfile
metadata: {name: hosted, namespace: NS}
spec:
  images: {ingress: registry.example.com/nexo/ingress:0.2.0, egress: registry.example.com/nexo/egress:0.2.0}
---
apiVersion: nexo.io/v1alpha1
kind: NexoRouter
metadata: {name: by-database, namespace: NS}
spec:
  targets: [{name: primary, address: "mongo-0.mongo.db.svc:27017"}]
  defaultTarget: primary
---
apiVersion: nexo.io/v1alpha1
kind: NexoLicense
metadata: {name: hosted, namespace: NS}
spec:
  secretRef: {name: license, key: license}
---
apiVersion: nexo.io/v1alpha1
kind: NexoPipeline
metadata: {name: routed, namespace: NS}
spec:
  router: {kind: NexoRouter, name: by-database}
---
apiVersion: nexo.io/v1alpha1
kind: NexoProxy
metadata: {name: PROXY, namespace: NS}
spec:
  pipelineRef: {name: routed}
  upstream: {name: primary, address: "mongo-0.mongo.db.svc:27017"}
  profileRef: {name: hosted}
  licenseRef: {name: hosted}
  replicas: 1
`)
}

// deploy queues a deploy command for env with the graph of proxy in ns and returns its id.
func (cp *controlPlaneProcess) deploy(t *testing.T, env, ns, proxy string) string {
	t.Helper()
	file := filepath.Join(cp.dir, proxy+".yaml")
	must(t, os.WriteFile(file, []byte(deployGraph(ns, proxy)), 0o644))
	before := map[string]bool{}
	for _, c := range cp.view(t, env).Commands {
		before[c.ID] = true
	}
	cp.cli(t, "command", "deploy", env, "-f", file, "--namespace", ns)
	for _, c := range cp.view(t, env).Commands {
		if !before[c.ID] {
			return c.ID
		}
	}
	t.Fatal("the deploy command is not in the environment's history")
	return ""
}

func waitUntil(timeout time.Duration, ok func() bool) error {
	deadline := time.Now().Add(timeout)
	for !ok() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not after %s", timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return nil
}
