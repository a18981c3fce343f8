package upgrade_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/catalog"
	"github.com/nexo-io/nexo-edge/contract/license"
	"github.com/nexo-io/nexo-edge/contract/scheme"
	"github.com/nexo-io/nexo-edge/contract/signature"
	"github.com/nexo-io/nexo-edge/contract/wire"
	"github.com/nexo-io/nexo-edge/test/framework/testcluster"
	"github.com/nexo-io/nexo-edge/test/framework/testinstall"
)

// TestKustomizeInstallFromScratch: a new user's kustomize install, in the README's order, of the
// unmodified config/namespaced folder: applied with kubectl apply --server-side -k, the operator
// and the Manager started from the Deployments it made (no flag added but the test license
// authority), and only then the
// installation ConfigMap (Control Plane URL and environment id) and the connect token. Until the
// ConfigMap exists the Manager is Ready and its status names what to create; afterwards it
// connects without a restart, and a deploy signed by the Control Plane for this environment
// becomes a Ready proxy in nexo-proxies (the folder's deploy limit). Nothing passes
// --environment-id: the operator reads it from the ConfigMap.
func TestKustomizeInstallFromScratch(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := &suite{t: t, ctx: ctx, dir: t.TempDir()}
	var err error
	s.cluster, err = testcluster.Start(ctx, testcluster.Options{Mode: testcluster.Full, Nodes: []testcluster.Node{{Name: "edge-a"}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.cluster.Stop() })
	if s.k8s, err = client.NewWithWatch(s.cluster.Config, client.Options{Scheme: scheme.New()}); err != nil {
		t.Fatal(err)
	}
	cpURL, admin, envID := s.controlPlane()

	s.kustomizeApply(filepath.Join(testcluster.RepoRoot(), "config", "namespaced"))
	const proxyNS = "nexo-proxies" // the folder creates it
	if err := testinstall.WaitCRDsServed(ctx, s.cluster.Config, len(catalog.Kinds), time.Minute); err != nil {
		t.Fatal(err)
	}
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	if err := os.WriteFile(s.path("license-authority.pem"), signature.MarshalPublicKey(pub), 0o644); err != nil {
		t.Fatal(err)
	}
	op := s.start(wire.OperatorName, bins["operator"])
	if strings.Contains(strings.Join(op.Args, " "), "--environment-id") {
		t.Fatalf("the operator was started with an environment id flag: %v", op.Args)
	}

	// The Manager before its configuration: running and Ready (readiness is the process), saying
	// in its status what to create.
	podDir := s.path("manager-pod")
	_ = os.MkdirAll(podDir, 0o700)
	mgr, err := testinstall.RunDeployment(ctx, s.cluster.Config, testinstall.Namespace, wire.ManagerName, testinstall.PodOptions{Dir: podDir, Binary: bins["manager"]})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mgr.Stop)
	managerStatus := func() map[string]string { return testinstall.ManagerStatus(ctx, s.k8s, testinstall.Namespace) }
	s.poll("the unconfigured Manager is Ready and says what it waits for", time.Minute, func() (bool, string) {
		code, body := mgr.Probe("/readyz")
		st := managerStatus()
		return code == http.StatusOK && st[wire.StatusConfigured] == "false" &&
				strings.Contains(st[wire.StatusNotConfigured], "ConfigMap nexo-manager-config in namespace "+testinstall.Namespace+" with the key controlPlaneURL") && mgr.Running(),
			fmt.Sprintf("%d %s %v (running %v)", code, body, st, mgr.Running())
	})

	// The documented steps (README, kustomize).
	s.create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: wire.InstallConfigMap, Namespace: testinstall.Namespace},
		Data: map[string]string{wire.ConfigControlPlane: cpURL, wire.ConfigEnvironmentID: envID}})
	token, err := os.ReadFile(s.path("connect-token"))
	if err != nil {
		t.Fatal(err)
	}
	s.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: wire.ConnectTokenSecret, Namespace: testinstall.Namespace}, Data: map[string][]byte{wire.ConnectTokenKey: token}})
	s.poll("the Manager after its ConfigMap and token: configured and connected", time.Minute, func() (bool, string) {
		st := managerStatus()
		return st[wire.StatusConfigured] == "true" && st[wire.StatusLastHeartbeatResult] == "ok", fmt.Sprint(st)
	})

	doc, _ := license.Issue(license.Claims{Licensee: "Acme Corp", ExpiresAt: time.Now().Add(24 * time.Hour), MaxProxies: 2}, priv)
	s.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "acme-license", Namespace: proxyNS}, Data: map[string][]byte{"license": []byte(doc)}})
	graph := s.path("graph.yaml")
	_ = os.WriteFile(graph, []byte(testinstall.HostedGraph(proxyNS, 1)), 0o644)
	if out, err := s.run(bins["controlplane"], "--server", admin.URL, "--admin-token-file", s.path("admin-token"), "command", "deploy", envID, "-f", graph, "--namespace", proxyNS); err != nil {
		t.Fatalf("deploy: %v\n%s", err, out)
	}
	proxy := &nexov1alpha1.NexoProxy{}
	s.poll("the signed proxy is Ready", 2*time.Minute, func() (bool, string) {
		if err := s.k8s.Get(ctx, client.ObjectKey{Namespace: proxyNS, Name: "orders-proxy"}, proxy); err != nil {
			return false, err.Error()
		}
		return proxy.Status.Phase == nexov1alpha1.ProxyReady && proxy.Status.ReadyReplicas == 1, fmt.Sprintf("phase %s, conditions %v", proxy.Status.Phase, proxy.Status.Conditions)
	})
}
