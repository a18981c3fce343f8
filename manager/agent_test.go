package manager_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/catalog"
	"github.com/nexo-io/nexo-edge/contract/fingerprint"
	"github.com/nexo-io/nexo-edge/contract/license"
	"github.com/nexo-io/nexo-edge/contract/protocol"
	"github.com/nexo-io/nexo-edge/contract/scheme"
	"github.com/nexo-io/nexo-edge/contract/signature"
	"github.com/nexo-io/nexo-edge/contract/wire"
	"github.com/nexo-io/nexo-edge/controlplane"
	"github.com/nexo-io/nexo-edge/manager"
	"github.com/nexo-io/nexo-edge/operator"
	"github.com/nexo-io/nexo-edge/test/framework/testcluster"
	"github.com/nexo-io/nexo-edge/test/framework/testcontrolplane"
	"github.com/nexo-io/nexo-edge/test/framework/testinstall"
)

const adminToken = "admin"

var (
	cluster *testcluster.Cluster
	k8s     client.Client // admin: sets the cluster up and inspects it
	// managerConfig, managerClient act as the chart's nexo-manager ServiceAccount: the Manager
	// under test has exactly the product's rights.
	managerConfig *rest.Config
	managerClient client.Client
	cp            *controlPlane
	logs          bytes.Buffer
	logsMu        sync.Mutex
	token         string
	envID         string
	cpPub         ed25519.PublicKey
	// cpKeyForTests is the reference Control Plane's signing key, for crafted commands.
	cpKeyForTests ed25519.PrivateKey
)

// controlPlane is the real reference Control Plane behind a switch that can make acks fail.
type controlPlane struct {
	// srv is the real Control Plane behind the faults below; srv.Restart replaces it with a new
	// process on the same database.
	srv      *testcontrolplane.ControlPlane
	failAcks atomic.Int32 // the next N acks answer 500
	ackCalls atomic.Int32
	hang     atomic.Bool // every request hangs longer than the Manager's timeout
}

func (c *controlPlane) restart() {
	if err := c.srv.Restart(); err != nil {
		panic(err)
	}
}

func (c *controlPlane) admin(method, path string, body, out any) int {
	raw, _ := json.Marshal(body)
	req, _ := http.NewRequest(method, c.srv.URL+path, bytes.NewReader(raw))
	req.Header.Set("Authorization", "Bearer "+adminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	if out != nil {
		_ = json.NewDecoder(resp.Body).Decode(out)
	}
	return resp.StatusCode
}

func TestMain(m *testing.M) {
	flag.Parse()
	if testcluster.Fuzzing() { // the fuzz targets are pure: no cluster for them
		os.Exit(m.Run())
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx := context.Background()
	ctrllog.SetLogger(zap.New(zap.WriteTo(io.Discard))) // the operator's logs; the Manager's go to logs
	var err error
	cluster, err = testcluster.Start(ctx, testcluster.Options{Mode: testcluster.Full, CRDDirectoryPaths: []string{testcluster.CRDDir()},
		Nodes: []testcluster.Node{{Name: "n1", Region: "eu-west-1", Zone: "eu-west-1a"}}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cluster.Stop()
	s := scheme.New()
	_ = apiextensionsv1.AddToScheme(s)
	k8s, _ = client.New(cluster.Config, client.Options{Scheme: s})

	var cpKey, vendorKey ed25519.PrivateKey
	cpPub, cpKey, _ = ed25519.GenerateKey(rand.Reader)
	cpKeyForTests = cpKey
	vendorPub, vendorKey, _ := ed25519.GenerateKey(rand.Reader)
	for _, ns := range []string{"nexo-system", "shop"} {
		_ = k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	doc, _ := license.Issue(license.Claims{Licensee: "Acme Corp", ExpiresAt: time.Now().Add(24 * time.Hour),
		Entitlements: []string{"NexoTenantIsolation", "NexoRateLimit", "NexoCommandPolicy", "NexoAuthPolicy", "NexoPIIMasking", "NexoResponseLimit", "NexoConnectionPool", "NexoConnectionLimit"}, MaxProxies: 5}, vendorKey)
	for _, sec := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Name: "nexo-trusted-keys", Namespace: "nexo-system"}, Data: map[string][]byte{"cp.pem": signature.MarshalPublicKey(cpPub)}},
		{ObjectMeta: metav1.ObjectMeta{Name: "nexo-registry", Namespace: "nexo-system", Labels: map[string]string{wire.RegistryCredentialLabel: "true"}}, Type: corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{}}`)}},
		{ObjectMeta: metav1.ObjectMeta{Name: "acme-license", Namespace: "shop"}, Data: map[string][]byte{"license": []byte(doc)}},
		{ObjectMeta: metav1.ObjectMeta{Name: "orders-upstream-credentials", Namespace: "shop"}, Data: map[string][]byte{"username": []byte("orders"), "password": []byte("x")}},
		{ObjectMeta: metav1.ObjectMeta{Name: "reporting-upstream-credentials", Namespace: "shop"}, Data: map[string][]byte{"username": []byte("reporting"), "password": []byte("y")}},
		{ObjectMeta: metav1.ObjectMeta{Name: "pii-salt", Namespace: "shop"}, Data: map[string][]byte{"salt": []byte("z")}},
	} {
		if err := k8s.Create(ctx, sec); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	keyFile := filepath.Join(cluster.Dir, "vendor.pem")
	_ = os.WriteFile(keyFile, signature.MarshalPublicKey(vendorPub), 0o600)

	cp = &controlPlane{}
	cp.srv, err = testcontrolplane.Start(testcontrolplane.Options{DB: filepath.Join(cluster.Dir, "cp.db"), Key: cpKey, AdminToken: adminToken, NextHeartbeat: time.Second,
		Wrap: func(real http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if cp.hang.Load() && strings.HasPrefix(r.URL.Path, "/v1/") {
					time.Sleep(2 * time.Second)
				}
				if strings.HasSuffix(r.URL.Path, "/ack") {
					cp.ackCalls.Add(1)
					if cp.failAcks.Load() > 0 {
						cp.failAcks.Add(-1)
						http.Error(w, `{"error":"injected failure"}`, http.StatusInternalServerError)
						return
					}
				}
				real.ServeHTTP(w, r)
			})
		}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cp.srv.Stop()
	var env controlplane.NewEnvironment
	cp.admin("POST", "/admin/environments", map[string]string{"name": "agent-test"}, &env)
	token, envID = env.Token, env.ID
	// Installed by the chart (for this environment), with its admission policy; the operator and
	// the Manager run as its ServiceAccounts.
	if err := testinstall.Chart(cluster, "nexo-system", testinstall.Values(envID, nil, map[string]any{
		"operator": map[string]any{"secretCopyNamespaces": []any{"shop"}}})); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	opConfig, err := testinstall.Operator(ctx, cluster)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if managerConfig, err = testinstall.Manager(ctx, cluster); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	managerClient, _ = client.New(managerConfig, client.Options{Scheme: s})
	// The operator accepts signatures for this environment only.
	opCtx, stopOp := context.WithCancel(ctx)
	defer stopOp()
	mgr, _, err := operator.New(opCtx, opConfig, operator.Config{MetricsAddr: "0", ProbeAddr: "0", OperatorNamespace: "nexo-system",
		TrustedKeysSecret: "nexo-trusted-keys", LicenseKeyFiles: []string{keyFile}, SkipNameValidation: true, EnvironmentID: envID})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	go func() { _ = mgr.Start(opCtx) }()
	return m.Run()
}

// newAgent builds a Manager whose logs go to the shared buffer.
func newAgent(t *testing.T, opts ...func(*manager.Config)) *manager.Agent {
	t.Helper()
	tokenFile := filepath.Join(t.TempDir(), "token")
	_ = os.WriteFile(tokenFile, []byte(token), 0o400)
	d, _ := discovery.NewDiscoveryClientForConfig(managerConfig)
	log := funcr.New(func(prefix, args string) {
		logsMu.Lock()
		defer logsMu.Unlock()
		logs.WriteString(prefix + " " + args + "\n")
	}, funcr.Options{})
	cfg := manager.Config{TokenFile: tokenFile, ControlPlaneURL: cp.srv.URL, Namespace: "nexo-system", TrustedKeysSecret: "nexo-trusted-keys", RESTConfig: managerConfig,
		TrustedKeys: func() (map[string]ed25519.PublicKey, error) {
			return map[string]ed25519.PublicKey{signature.KeyID(cpPub): cpPub}, nil
		}, Version: "0.2.0", AckAttempts: 2, Log: log,
		Limits:     protocol.Limits{Namespaces: []string{"shop"}, ImageRepositories: []string{"registry.example.com/nexo/proxy"}},
		HTTPClient: &http.Client{Timeout: 500 * time.Millisecond}}
	for _, o := range opts {
		o(&cfg)
	}
	return manager.NewAgent(cfg, managerClient, d)
}

func enqueue(t *testing.T, c protocol.Command) string {
	t.Helper()
	var res map[string]string
	if code := cp.admin("POST", "/admin/environments/"+envID+"/commands", c, &res); code != 201 {
		t.Fatalf("enqueue %s: %d", c.Type, code)
	}
	return res["id"]
}

func commandStatus(t *testing.T, id string) controlplane.CommandView {
	t.Helper()
	var v controlplane.EnvironmentView
	cp.admin("GET", "/admin/environments/"+envID, nil, &v)
	for _, c := range v.Commands {
		if c.ID == id {
			return c
		}
	}
	t.Fatalf("no command %s", id)
	return controlplane.CommandView{}
}

func round(t *testing.T, a *manager.Agent) {
	t.Helper()
	if _, err := a.Round(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestFirstHeartbeatCarriesTheInventory(t *testing.T) {
	round(t, newAgent(t))
	var v controlplane.EnvironmentView
	cp.admin("GET", "/admin/environments/"+envID, nil, &v)
	inv := v.Inventory
	ks := &corev1.Namespace{}
	_ = k8s.Get(context.Background(), client.ObjectKey{Name: "kube-system"}, ks)
	want, _, _ := fingerprint.Expected()
	switch {
	case inv == nil:
		t.Fatal("no heartbeat recorded")
	case inv.ClusterID != string(ks.UID) || v.ClusterID != string(ks.UID):
		t.Errorf("cluster id %q / bound %q, want the kube-system UID %s", inv.ClusterID, v.ClusterID, ks.UID)
	case inv.Cluster.Region != "eu-west-1" || inv.Cluster.Zone != "eu-west-1a" || inv.Cluster.KubernetesVersion != "v1.37.2":
		t.Errorf("cluster metadata %+v", inv.Cluster)
	case len(inv.InstalledKinds) != len(catalog.Kinds) || inv.SchemaFingerprint != want || inv.BundleVersion != catalog.BuildVersion || inv.InstalledBy != manager.InstalledByHelm:
		t.Errorf("kinds %d, fingerprint %s (want %s), bundle %s installed by %q", len(inv.InstalledKinds), inv.SchemaFingerprint, want, inv.BundleVersion, inv.InstalledBy)
	case !strings.Contains(strings.Join(inv.Capabilities, ","), protocol.CapSchemaFingerprint) || inv.ProtocolVersion != protocol.Version ||
		!slices.Contains(inv.Capabilities, protocol.CapPromotionContract):
		t.Errorf("capabilities %v", inv.Capabilities)
	case !slices.Contains(inv.PipelineKinds["request"], "NexoRateLimit") || !slices.Contains(inv.PipelineKinds["router"], "NexoRouter") ||
		slices.Contains(inv.PipelineKinds["response"], "NexoRateLimit"):
		t.Errorf("pipeline kinds from the installed CRD %v", inv.PipelineKinds)
	}
	// The bundle version is the installed one, read from the cluster (here the chart's label on
	// the operator Deployment): change it there and the next heartbeat says so.
	op := &appsv1.Deployment{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: "nexo-system", Name: "nexo-operator"}, op); err != nil {
		t.Fatal(err)
	}
	before := op.DeepCopy()
	op.Labels["helm.sh/chart"] = "nexo-edge-0.1.9"
	if err := k8s.Patch(context.Background(), op, client.MergeFrom(before)); err != nil {
		t.Fatal(err)
	}
	round(t, newAgent(t))
	cp.admin("GET", "/admin/environments/"+envID, nil, &v)
	if v.Inventory.BundleVersion != "0.1.9" {
		t.Errorf("bundle version %q after the installed operator changed to 0.1.9", v.Inventory.BundleVersion)
	}
	// Once the Control Plane announced inventory.kind-support (its answer to the first
	// heartbeat), the heartbeat names the installed kinds whose CRD says schema-only: what the
	// compatibility gate refuses there.
	if len(v.Inventory.SchemaOnlyKinds) != 0 {
		t.Errorf("a first heartbeat sent schema-only kinds before the Control Plane announced it reads them: %v", v.Inventory.SchemaOnlyKinds)
	}
	again := newAgent(t)
	round(t, again)
	round(t, again)
	cp.admin("GET", "/admin/environments/"+envID, nil, &v)
	var schemaOnly []string
	for _, k := range catalog.Kinds {
		if k.Support == catalog.SchemaOnly {
			schemaOnly = append(schemaOnly, k.Kind)
		}
	}
	slices.Sort(schemaOnly)
	if !slices.Equal(v.Inventory.SchemaOnlyKinds, schemaOnly) {
		t.Errorf("schema-only kinds %v, want %v", v.Inventory.SchemaOnlyKinds, schemaOnly)
	}
	before = op.DeepCopy()
	op.Labels["helm.sh/chart"] = "nexo-edge-" + catalog.BuildVersion
	_ = k8s.Patch(context.Background(), op, client.MergeFrom(before))
	status := &corev1.ConfigMap{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: "nexo-system", Name: wire.ManagerStatusConfigMap}, status); err != nil || status.Data[wire.StatusControlPlaneReachable] != "true" || status.Data[wire.StatusLastHeartbeatTime] == "" {
		t.Errorf("status ConfigMap %v (%v)", status.Data, err)
	}
}

func sampleManifests(t *testing.T) []json.RawMessage {
	t.Helper()
	samples, err := testcluster.Samples()
	if err != nil {
		t.Fatal(err)
	}
	var out []json.RawMessage
	for _, k := range catalog.Kinds {
		if k.Support != catalog.Reconciled {
			continue
		}
		u := samples[k.Kind]
		u.SetNamespace("shop")
		raw, _ := u.MarshalJSON()
		out = append(out, raw)
	}
	return out
}

func TestDeployRolloutUninstallUpgrade(t *testing.T) {
	ctx := context.Background()
	a := newAgent(t)
	deployID := enqueue(t, protocol.Command{Type: protocol.Deploy, Namespaces: []string{"shop"}, Manifests: sampleManifests(t)})
	round(t, a)
	if c := commandStatus(t, deployID); c.Status != protocol.Applied {
		t.Fatalf("deploy: %+v", c)
	}
	p := &nexov1alpha1.NexoProxy{}
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "orders-proxy"}, p); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return p.Status.Phase == nexov1alpha1.ProxyReady, nil
	})
	if err != nil {
		t.Fatalf("deployed proxy never Ready: %+v", p.Status)
	}
	if p.Labels[wire.OwnerLabel] != "env-"+envID || !meta.IsStatusConditionTrue(p.Status.Conditions, nexov1alpha1.ConditionSignatureValid) {
		t.Errorf("deployed proxy labels %v, conditions %v", p.Labels, p.Status.Conditions)
	}
	round(t, a)
	var v controlplane.EnvironmentView
	cp.admin("GET", "/admin/environments/"+envID, nil, &v)
	if v.Inventory.ManagedProxies != 1 || v.Inventory.Deployments[0].ReadyReplicas != 2 {
		t.Errorf("next heartbeat inventory %+v", v.Inventory.Deployments)
	}

	// An unowned proxy next to it.
	unowned := p.DeepCopy()
	unowned.ObjectMeta = metav1.ObjectMeta{Name: "unowned-proxy", Namespace: "shop"}
	unowned.Status = nexov1alpha1.NexoProxyStatus{}
	if err := k8s.Create(ctx, unowned); err != nil {
		t.Fatal(err)
	}
	// A rollout to an image inside the cluster's limit but not approved by the proxy's profile is
	// refused before anything is written: the operator would refuse it and the proxy would stay
	// Degraded on its last revision.
	generation := p.Generation
	refusedID := enqueue(t, protocol.Command{Type: protocol.Rollout, Image: "registry.example.com/nexo/proxy:9.9.9"})
	round(t, a)
	if c := commandStatus(t, refusedID); c.Status != protocol.Failed || !strings.Contains(c.Message, "shop/orders-proxy (NexoDeploymentProfile standard approves") ||
		!strings.Contains(c.Message, "registry.example.com/nexo/proxy:0.2.1") || !strings.Contains(c.Message, "spec.approvedImages") || !strings.Contains(c.Message, "nothing was changed") {
		t.Errorf("rollout to an unapproved image: %+v", c)
	}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "orders-proxy"}, p); err != nil || p.Generation != generation || p.Spec.ProxyImage != "" {
		t.Errorf("the refused rollout changed the proxy: generation %d → %d, image %q (%v)", generation, p.Generation, p.Spec.ProxyImage, err)
	}
	rollID := enqueue(t, protocol.Command{Type: protocol.Rollout, Image: "registry.example.com/nexo/proxy:0.2.1"})
	uninstID := enqueue(t, protocol.Command{Type: protocol.Uninstall, Proxy: &protocol.ObjectRef{Namespace: "shop", Name: "unowned-proxy"}})
	upID := enqueue(t, protocol.Command{Type: protocol.Upgrade, TargetVersion: "99.0.0"}) // not the installed bundle
	round(t, a)
	_ = k8s.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "orders-proxy"}, p)
	_ = k8s.Get(ctx, client.ObjectKeyFromObject(unowned), unowned)
	if c := commandStatus(t, rollID); c.Status != protocol.Applied || p.Spec.ProxyImage != "registry.example.com/nexo/proxy:0.2.1" || unowned.Spec.ProxyImage != "" {
		t.Errorf("rollout %+v: owned image %q, unowned image %q", c, p.Spec.ProxyImage, unowned.Spec.ProxyImage)
	}
	if c := commandStatus(t, uninstID); c.Status != protocol.Failed || !strings.Contains(c.Message, "not owned") || unowned.DeletionTimestamp != nil {
		t.Errorf("uninstall of an unowned proxy: %+v", c)
	}
	if c := commandStatus(t, upID); c.Status != protocol.Failed || !strings.Contains(c.Message, "nexoctl install") {
		t.Errorf("upgrade: %+v", c)
	}
	// The rolled-out proxy came re-signed by the Control Plane: still trusted, and its pods roll.
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "orders-proxy"}, p); err != nil {
			return false, err
		}
		dep := &appsv1.Deployment{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "orders-proxy"}, dep); err != nil {
			return false, err
		}
		return p.Status.Phase == nexov1alpha1.ProxyReady && p.Status.ObservedGeneration == p.Generation &&
			dep.Spec.Template.Spec.Containers[0].Image == "registry.example.com/nexo/proxy:0.2.1", nil
	})
	if err != nil || !meta.IsStatusConditionTrue(p.Status.Conditions, nexov1alpha1.ConditionSignatureValid) {
		t.Errorf("after the rollout the proxy is %s, conditions %v", p.Status.Phase, p.Status.Conditions)
	}
	// Uninstall of the owned one deletes it.
	delID := enqueue(t, protocol.Command{Type: protocol.Uninstall, Proxy: &protocol.ObjectRef{Namespace: "shop", Name: "orders-proxy"}})
	round(t, a)
	if c := commandStatus(t, delID); c.Status != protocol.Applied {
		t.Errorf("uninstall of the owned proxy: %+v", c)
	}
}

// The upgrade command answers from the installed bundle (the operator Deployment's installer
// labels), not from the Manager's own build: with the bundle labelled 0.2.0 under a Manager built
// as this version, an upgrade to 0.2.0 is already done and one to this version is not.
func TestUpgradeAnswersFromTheInstalledBundle(t *testing.T) {
	ctx := context.Background()
	a := newAgent(t)
	op := &appsv1.Deployment{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: "nexo-system", Name: wire.OperatorName}, op); err != nil {
		t.Fatal(err)
	}
	chart := op.Labels["helm.sh/chart"]
	relabel := func(v string) {
		t.Helper()
		patch := client.MergeFrom(op.DeepCopy())
		op.Labels["helm.sh/chart"] = v
		if err := k8s.Patch(ctx, op, patch); err != nil {
			t.Fatal(err)
		}
	}
	relabel("nexo-edge-0.2.0")
	t.Cleanup(func() { relabel(chart) })
	same := enqueue(t, protocol.Command{Type: protocol.Upgrade, TargetVersion: "0.2.0"})
	newer := enqueue(t, protocol.Command{Type: protocol.Upgrade, TargetVersion: catalog.BuildVersion})
	round(t, a)
	if c := commandStatus(t, same); c.Status != protocol.Applied || !strings.Contains(c.Message, "already is 0.2.0 (installed by helm)") {
		t.Errorf("upgrade to the installed 0.2.0: %s %q", c.Status, c.Message)
	}
	if c := commandStatus(t, newer); c.Status != protocol.Failed || !strings.Contains(c.Message, "installed 0.2.0 by helm, requested "+catalog.BuildVersion) {
		t.Errorf("upgrade from 0.2.0 to %s: %s %q", catalog.BuildVersion, c.Status, c.Message)
	}
}

func TestAckFailuresApplyOnce(t *testing.T) {
	a := newAgent(t)
	manifest := json.RawMessage(`{"apiVersion":"nexo.io/v1alpha1","kind":"NexoRateLimit","metadata":{"name":"once","namespace":"shop"},"spec":{"operationsPerSecond":7}}`)
	id := enqueue(t, protocol.Command{Type: protocol.Deploy, Namespaces: []string{"shop"}, Manifests: []json.RawMessage{manifest}})
	before := appliedCount(t, protocol.Deploy, protocol.Applied)
	cp.failAcks.Store(3) // two attempts fail in the first round, one in the second
	round(t, a)
	if c := commandStatus(t, id); c.Status == protocol.Applied {
		t.Fatal("ack should have failed")
	}
	restarted := newAgent(t) // a Manager restart: state lives in the cluster, not in memory
	round(t, restarted)
	if c := commandStatus(t, id); c.Status != protocol.Applied {
		t.Fatalf("ack did not arrive after recovery: %+v", c)
	}
	if n := appliedCount(t, protocol.Deploy, protocol.Applied) - before; n != 1 {
		t.Errorf("command applied %v times, want exactly once", n)
	}
}

// appliedCount reads nexo_manager_commands_total{type,status} from the Manager's registry.
func appliedCount(t *testing.T, typ, status string) float64 {
	t.Helper()
	families, err := manager.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "nexo_manager_commands_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["type"] == typ && labels["status"] == status {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// TestDeployRefusesBadManifests: whatever a Control Plane sends, an unsigned manifest, a
// non-nexo object or a manifest outside the command's namespaces fails the whole command with
// nothing written. The commands come from a crafted server (a compromised or buggy Control Plane).
func TestDeployRefusesBadManifests(t *testing.T) {
	ctx := context.Background()
	signedOK := func(name string) json.RawMessage {
		// signed by a key the Manager does not trust
		_, other, _ := ed25519.GenerateKey(rand.Reader)
		u := &unstructured.Unstructured{}
		_ = u.UnmarshalJSON([]byte(`{"apiVersion":"nexo.io/v1alpha1","kind":"NexoRateLimit","metadata":{"name":"` + name + `","namespace":"shop"},"spec":{"operationsPerSecond":3}}`))
		_ = signature.Sign(u, other, signature.Claims{Audience: envID, Revision: 1})
		raw, _ := u.MarshalJSON()
		return raw
	}
	cmds := []protocol.Command{
		{ID: "bad-unsigned", Type: protocol.Deploy, Namespaces: []string{"shop"}, Manifests: []json.RawMessage{
			json.RawMessage(`{"apiVersion":"nexo.io/v1alpha1","kind":"NexoRateLimit","metadata":{"name":"unsigned","namespace":"shop"},"spec":{"operationsPerSecond":3}}`)}},
		{ID: "bad-key", Type: protocol.Deploy, Namespaces: []string{"shop"}, Manifests: []json.RawMessage{signedOK("foreign-key")}},
		{ID: "bad-kind", Type: protocol.Deploy, Namespaces: []string{"shop"}, Manifests: []json.RawMessage{
			json.RawMessage(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"evil","namespace":"shop"}}`)}},
		{ID: "bad-namespace", Type: protocol.Deploy, Namespaces: []string{"other"}, Manifests: []json.RawMessage{signedOK("elsewhere")}},
	}
	acks := map[string]protocol.Ack{}
	var mu sync.Mutex
	crafted := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/ack") {
			var a protocol.Ack
			_ = json.NewDecoder(r.Body).Decode(&a)
			mu.Lock()
			acks[strings.Split(r.URL.Path, "/")[3]] = a
			mu.Unlock()
			w.WriteHeader(http.StatusNoContent)
			return
		}
		_ = json.NewEncoder(w).Encode(protocol.HeartbeatResponse{NextHeartbeatSeconds: 1, Commands: cmds})
	}))
	defer crafted.Close()
	a := newAgent(t, func(c *manager.Config) { c.ControlPlaneURL = crafted.URL })
	round(t, a)
	for _, c := range cmds {
		if ack := acks[c.ID]; ack.Status != protocol.Failed || !strings.Contains(ack.Message, "nothing was applied") {
			t.Errorf("%s: %+v", c.ID, ack)
		}
	}
	for _, name := range []string{"unsigned", "foreign-key", "elsewhere"} {
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: "shop", Name: name}, &nexov1alpha1.NexoRateLimit{}); err == nil {
			t.Errorf("%s was written", name)
		}
	}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "evil"}, &corev1.ConfigMap{}); err == nil {
		t.Error("a ConfigMap was written")
	}
}

// TestAdoptionNeedsTheMigrationGate: a legacy object without the owner label is refused; with
// --allow-adoption and the nexo.io/adopt annotation it is adopted and the ack says so.
func TestAdoptionNeedsTheMigrationGate(t *testing.T) {
	ctx := context.Background()
	legacy := &nexov1alpha1.NexoConnectionLimit{ObjectMeta: metav1.ObjectMeta{Name: "legacy-limit", Namespace: "shop"},
		Spec: nexov1alpha1.NexoConnectionLimitSpec{MaxConnections: 10}}
	if err := k8s.Create(ctx, legacy); err != nil {
		t.Fatal(err)
	}
	manifest := json.RawMessage(`{"apiVersion":"nexo.io/v1alpha1","kind":"NexoConnectionLimit","metadata":{"name":"legacy-limit","namespace":"shop"},"spec":{"maxConnections":20}}`)
	id := enqueue(t, protocol.Command{Type: protocol.Deploy, Namespaces: []string{"shop"}, Manifests: []json.RawMessage{manifest}})
	round(t, newAgent(t))
	if c := commandStatus(t, id); c.Status != protocol.Failed || !strings.Contains(c.Message, "not owned by this Manager") {
		t.Fatalf("deploy over a legacy object: %+v", c)
	}
	_ = k8s.Get(ctx, client.ObjectKeyFromObject(legacy), legacy)
	if legacy.Spec.MaxConnections != 10 {
		t.Fatal("the legacy object was modified without the migration gate")
	}
	legacy.Annotations = map[string]string{wire.AdoptAnnotation: "true"}
	if err := k8s.Update(ctx, legacy); err != nil {
		t.Fatal(err)
	}
	id = enqueue(t, protocol.Command{Type: protocol.Deploy, Namespaces: []string{"shop"}, Manifests: []json.RawMessage{manifest}})
	round(t, newAgent(t, func(c *manager.Config) { c.AllowAdoption = true }))
	if c := commandStatus(t, id); c.Status != protocol.Applied || !strings.Contains(c.Message, "adopted") {
		t.Fatalf("adoption: %+v", c)
	}
	_ = k8s.Get(ctx, client.ObjectKeyFromObject(legacy), legacy)
	if legacy.Spec.MaxConnections != 20 || legacy.Labels[wire.OwnerLabel] != "env-"+envID {
		t.Errorf("adopted object: %+v %v", legacy.Spec, legacy.Labels)
	}
}

// TestControlPlaneOutageIsReported: a hanging Control Plane times out, the status object says it
// is unreachable (and never holds the token); the next round after recovery succeeds.
func TestControlPlaneOutageIsReported(t *testing.T) {
	ctx := context.Background()
	a := newAgent(t)
	cp.hang.Store(true)
	if _, err := a.Round(ctx); err == nil {
		t.Fatal("a hanging Control Plane did not fail the round")
	} else if strings.Contains(err.Error(), token) {
		t.Fatal("the error contains the token")
	}
	status := &corev1.ConfigMap{}
	_ = k8s.Get(ctx, client.ObjectKey{Namespace: "nexo-system", Name: wire.ManagerStatusConfigMap}, status)
	if status.Data[wire.StatusControlPlaneReachable] != "false" || status.Data[wire.StatusLastHeartbeatResult] == "ok" {
		t.Errorf("outage not reported: %v", status.Data)
	}
	cp.hang.Store(false)
	round(t, a)
	_ = k8s.Get(ctx, client.ObjectKey{Namespace: "nexo-system", Name: wire.ManagerStatusConfigMap}, status)
	if status.Data[wire.StatusControlPlaneReachable] != "true" {
		t.Errorf("recovery not reported: %v", status.Data)
	}
	for k, v := range status.Data {
		if strings.Contains(v, token) {
			t.Errorf("status %s holds the token", k)
		}
	}
}

// TestControlPlaneRestartMidCommand: the Control Plane goes away after delivering a command
// (acks fail) and comes back from its database; the ack arrives and the command ran once.
func TestControlPlaneRestartMidCommand(t *testing.T) {
	a := newAgent(t)
	manifest := json.RawMessage(`{"apiVersion":"nexo.io/v1alpha1","kind":"NexoRateLimit","metadata":{"name":"mid-restart","namespace":"shop"},"spec":{"operationsPerSecond":9}}`)
	id := enqueue(t, protocol.Command{Type: protocol.Deploy, Namespaces: []string{"shop"}, Manifests: []json.RawMessage{manifest}})
	before := appliedCount(t, protocol.Deploy, protocol.Applied)
	cp.failAcks.Store(2) // both attempts of this round
	round(t, a)
	cp.restart()
	round(t, a)
	if c := commandStatus(t, id); c.Status != protocol.Applied {
		t.Fatalf("after the restart: %+v", c)
	}
	if n := appliedCount(t, protocol.Deploy, protocol.Applied) - before; n != 1 {
		t.Errorf("applied %v times, want once", n)
	}
}

// TestTokenRotation: the Control Plane issues a new token for the environment (a protected
// admin operation); the old one keeps working during the grace period; nexoctl install
// --token-file NEW replaces the Secret (here: the mounted file) and the Manager uses it at the
// next heartbeat without a restart; from then on the old token gets 401 saying it was rotated.
func TestTokenRotation(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	_ = os.WriteFile(tokenFile, []byte(token), 0o600)
	a := newAgent(t, func(c *manager.Config) { c.TokenFile = tokenFile })
	round(t, a)
	var rotated controlplane.RotatedToken
	if code := cp.admin("POST", "/admin/environments/"+envID+"/token", nil, &rotated); code != 200 || rotated.Token == "" || rotated.Token == token {
		t.Fatalf("rotate: %d", code)
	}
	old := token
	token = rotated.Token // later tests use the current token
	round(t, a)           // still the old file: valid during the grace period
	_ = os.WriteFile(tokenFile, []byte(rotated.Token), 0o600)
	round(t, a) // the new token; the old one's grace ends
	_ = os.WriteFile(tokenFile, []byte(old), 0o600)
	_, err := a.Round(context.Background())
	if err == nil || !strings.Contains(err.Error(), "rotated") {
		t.Fatalf("the old token after the Manager used the new one: %v", err)
	}
	if strings.Contains(err.Error(), old) {
		t.Fatal("the error shows the token")
	}
}

// Runs last: every Manager above logged into the buffer.
func TestManagerLogsNeverContainTheToken(t *testing.T) {
	logsMu.Lock()
	defer logsMu.Unlock()
	if logs.Len() == 0 {
		t.Fatal("no Manager logs captured")
	}
	if strings.Contains(logs.String(), token) {
		t.Fatal("the Manager logged the connect token")
	}
}

// The cluster's own limit: a deploy into a namespace outside it, a rollout to an image
// repository outside it and an uninstall outside it are refused before anything is written,
// acknowledged failed with where the limit is set; the heartbeat reports the limit. The Control
// Plane signed every command: its signature does not widen the limit.
func TestClusterLimitRefusesBeforeWriting(t *testing.T) {
	ctx := context.Background()
	a := newAgent(t)
	outside := json.RawMessage(`{"apiVersion":"nexo.io/v1alpha1","kind":"NexoRateLimit","metadata":{"name":"beyond","namespace":"kube-system"},"spec":{"operationsPerSecond":3}}`)
	deployID := enqueue(t, protocol.Command{Type: protocol.Deploy, Namespaces: []string{"kube-system"}, Manifests: []json.RawMessage{outside}})
	badImage := json.RawMessage(`{"apiVersion":"nexo.io/v1alpha1","kind":"NexoProxy","metadata":{"name":"miner","namespace":"shop"},"spec":{"pipelineRef":{"name":"p"},"profileRef":{"name":"p"},"licenseRef":{"name":"l"},"upstream":{"name":"u","address":"m:27017"},"proxyImage":"evil.example.com/miner:1"}}`)
	imageID := enqueue(t, protocol.Command{Type: protocol.Deploy, Namespaces: []string{"shop"}, Manifests: []json.RawMessage{badImage}})
	rollID := enqueue(t, protocol.Command{Type: protocol.Rollout, Image: "evil.example.com/miner:1"})
	uninstID := enqueue(t, protocol.Command{Type: protocol.Uninstall, Proxy: &protocol.ObjectRef{Namespace: "kube-system", Name: "x"}})
	round(t, a)
	// Each refusal names the value that would allow it, and where each install path sets it.
	nsHint := `adds "kube-system" to the deploy limit: chart value manager.deployNamespaces (nexoctl install --set manager.deployNamespaces={kube-system}); kustomize: key deployNamespaces of the ConfigMap nexo-manager-limits; OLM: NEXO_DEPLOY_NAMESPACES`
	imageHint := `adds "evil.example.com/miner" to the image limit: chart value manager.allowedImageRepositories; kustomize: key imageRepositories of the ConfigMap nexo-manager-limits; OLM: NEXO_ALLOWED_IMAGE_REPOSITORIES`
	for id, want := range map[string][2]string{
		deployID: {"namespace kube-system is outside this cluster's deploy limit (shop)", nsHint},
		imageID:  {"image evil.example.com/miner:1 is outside this cluster's image repositories (registry.example.com/nexo/proxy)", imageHint},
		rollID:   {"image evil.example.com/miner:1 is outside this cluster's image repositories", imageHint},
		uninstID: {"namespace kube-system is outside this cluster's deploy limit", nsHint},
	} {
		if c := commandStatus(t, id); c.Status != protocol.Failed || !strings.Contains(c.Message, want[0]) || !strings.Contains(c.Message, want[1]) {
			t.Errorf("%s: %+v, want %q and %q", id, c, want[0], want[1])
		}
	}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: "kube-system", Name: "beyond"}, &nexov1alpha1.NexoRateLimit{}); err == nil {
		t.Error("a deploy outside the limit was written")
	}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "miner"}, &nexov1alpha1.NexoProxy{}); err == nil {
		t.Error("a proxy with an image outside the limit was written")
	}
	var v controlplane.EnvironmentView
	cp.admin("GET", "/admin/environments/"+envID, nil, &v)
	if l := v.Inventory.Limits; l == nil || strings.Join(l.Namespaces, ",") != "shop" || strings.Join(l.ImageRepositories, ",") != "registry.example.com/nexo/proxy" {
		t.Errorf("the heartbeat reports limits %+v", l)
	}
	// Empty allows nothing, and is reported as such (not as "not reported").
	none := newAgent(t, func(c *manager.Config) { c.Limits = protocol.Limits{} })
	emptyID := enqueue(t, protocol.Command{Type: protocol.Deploy, Namespaces: []string{"shop"}, Manifests: sampleManifests(t)[:1]})
	round(t, none)
	if c := commandStatus(t, emptyID); c.Status != protocol.Failed || !strings.Contains(c.Message, "deploy limit (none)") {
		t.Errorf("deploy with no limit set: %+v", c)
	}
	cp.admin("GET", "/admin/environments/"+envID, nil, &v)
	if l := v.Inventory.Limits; l == nil || len(l.Namespaces) != 0 {
		t.Errorf("an empty limit is reported as %+v", l)
	}
}
