package controllers_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/nexo-io/nexo-edge/catalog"
	"github.com/nexo-io/nexo-edge/contract/license"
	"github.com/nexo-io/nexo-edge/contract/scheme"
	"github.com/nexo-io/nexo-edge/contract/signature"
	"github.com/nexo-io/nexo-edge/contract/wire"
	"github.com/nexo-io/nexo-edge/operator"
	"github.com/nexo-io/nexo-edge/test/framework/syncbuffer"
	"github.com/nexo-io/nexo-edge/test/framework/testcluster"
	"github.com/nexo-io/nexo-edge/test/framework/testinstall"
)

const operatorNamespace = "nexo-system"

// environmentID is the Control Plane environment the operator under test belongs to.
const environmentID = "0123456789ab"

// signedFor is what the test Control Plane signs with: this environment, at revision rev.
func signedFor(rev int64) signature.Claims {
	return signature.Claims{Audience: environmentID, Revision: rev}
}

// Namespaces the operator under test watches; "unwatched" is deliberately left out.
var watched = []string{"graph", "edit", "tamper", "lic-expired", "lic-entitle", "schema-only", "missing", "drift", "gc", "conflict", "conflict-svc", "nodeport", "maxproxies", "restart", "drift-stopped", "tenant-a", "replay", "slots-a", "slots-b", "revisions", "conflict-rev", "stalled", "components", "licenses", "runtime-secrets", "runtime-images"}

var (
	cluster   *testcluster.Cluster
	k8s       client.Client
	cpKey     ed25519.PrivateKey // the test Control Plane's signing key
	vendorKey ed25519.PrivateKey // the test license vendor key
	op        *runningOperator
	// operatorConfig authenticates as the chart's nexo-operator ServiceAccount: the operator under
	// test has exactly the rights a namespaced install gives it.
	operatorConfig *rest.Config
)

// runningOperator is the operator under test, in-process, behind a transport that counts
// mutating API calls.
type runningOperator struct {
	cancel   context.CancelFunc
	done     chan error
	mutating atomic.Int64
	mu       sync.Mutex
	writes   []string
	reads    []string // GETs of single objects (not lists, not watches)
}

func (o *runningOperator) countingTransport(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		switch req.Method {
		case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
			o.mutating.Add(1)
			o.mu.Lock()
			o.writes = append(o.writes, req.Method+" "+req.URL.Path)
			o.mu.Unlock()
		case http.MethodGet:
			o.mu.Lock()
			o.reads = append(o.reads, req.URL.Path)
			o.mu.Unlock()
		}
		return rt.RoundTrip(req)
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func startOperator(licenseKeyFile string) (*runningOperator, error) {
	o := &runningOperator{done: make(chan error, 1)}
	cfg := rest.CopyConfig(operatorConfig) // the chart's nexo-operator ServiceAccount
	cfg.Wrap(o.countingTransport)
	ctx, cancel := context.WithCancel(context.Background())
	o.cancel = cancel
	mgr, _, err := operator.New(ctx, cfg, operator.Config{
		MetricsAddr: "0", ProbeAddr: "0", OperatorNamespace: operatorNamespace,
		WatchNamespaces: watched, TrustedKeysSecret: "nexo-trusted-keys", EnvironmentID: environmentID, LicenseKeyFiles: []string{licenseKeyFile}, SkipNameValidation: true,
	})
	if err != nil {
		cancel()
		return nil, err
	}
	go func() { o.done <- mgr.Start(ctx) }()
	return o, nil
}

func (o *runningOperator) stop() error {
	o.cancel()
	return <-o.done
}

func TestMain(m *testing.M) {
	var w io.Writer = &operatorLogs
	if os.Getenv("NEXO_TEST_VERBOSE") != "" {
		w = io.MultiWriter(&operatorLogs, os.Stderr)
	}
	ctrllog.SetLogger(zap.New(zap.WriteTo(w), zap.UseDevMode(true)))
	flag.Parse()
	if testcluster.Fuzzing() { // the fuzz targets are pure: no cluster for them
		os.Exit(m.Run())
	}
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}

// operatorLogs collects the operator's logs so tests can check what was (not) logged.
var operatorLogs syncbuffer.Buffer

func run(m *testing.M) (int, error) {
	ctx := context.Background()
	var err error
	cluster, err = testcluster.Start(ctx, testcluster.Options{Mode: testcluster.Full, CRDDirectoryPaths: []string{testcluster.CRDDir()}})
	if err != nil {
		return 1, err
	}
	defer cluster.Stop()
	if k8s, err = client.New(cluster.Config, client.Options{Scheme: scheme.New()}); err != nil {
		return 1, err
	}
	var cpPub, vendorPub ed25519.PublicKey
	if cpPub, cpKey, err = ed25519.GenerateKey(rand.Reader); err != nil {
		return 1, err
	}
	if vendorPub, vendorKey, err = ed25519.GenerateKey(rand.Reader); err != nil {
		return 1, err
	}
	keyFile := filepath.Join(cluster.Dir, "license-vendor.pem")
	if err := os.WriteFile(keyFile, signature.MarshalPublicKey(vendorPub), 0o600); err != nil {
		return 1, err
	}
	for _, ns := range append([]string{operatorNamespace, "unwatched"}, watched...) {
		if err := k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return 1, err
		}
	}
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Name: "nexo-trusted-keys", Namespace: operatorNamespace}, Data: map[string][]byte{"control-plane.pem": signature.MarshalPublicKey(cpPub)}},
		{ObjectMeta: metav1.ObjectMeta{Name: "nexo-registry", Namespace: operatorNamespace, Labels: map[string]string{wire.RegistryCredentialLabel: "true"}}, Type: corev1.SecretTypeDockerConfigJson,
			Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"registry.example.com":{"auth":"dXNlcjpwYXNz"}}}`)}},
	} {
		if err := k8s.Create(ctx, s); err != nil {
			return 1, err
		}
	}
	// Installed as a user installs it: the chart, watching exactly these namespaces. The admission
	// policy is left out here, so the tests can tamper with managed objects as an admin and see
	// the operator's own defence hold (test/security covers the policy).
	if err := testinstall.Chart(cluster, operatorNamespace, testinstall.Values(environmentID, watched,
		map[string]any{"admissionPolicy": map[string]any{"enabled": false}, "manager": map[string]any{"enabled": false}})); err != nil {
		return 1, err
	}
	if operatorConfig, err = testinstall.Operator(ctx, cluster); err != nil {
		return 1, err
	}
	if op, err = startOperator(keyFile); err != nil {
		return 1, err
	}
	code := m.Run()
	if err := op.stop(); err != nil {
		return 1, fmt.Errorf("operator stopped with: %w", err)
	}
	return code, nil
}

// allStepKinds is every step kind the sample pipeline uses; the default test license entitles them.
var allStepKinds = []string{"NexoTenantIsolation", "NexoRateLimit", "NexoCommandPolicy", "NexoAuthPolicy", "NexoPIIMasking", "NexoResponseLimit", "NexoConnectionPool", "NexoConnectionLimit"}

func licenseDoc(t *testing.T, expires time.Time, entitlements []string) []byte {
	t.Helper()
	doc, err := license.Issue(license.Claims{Licensee: "Acme Corp", ExpiresAt: expires, Entitlements: entitlements, MaxProxies: 5}, vendorKey)
	if err != nil {
		t.Fatal(err)
	}
	return []byte(doc)
}

// sampleGraph reads config/samples (the orders graph), keyed by kind.
func sampleGraph(t *testing.T) map[string]*unstructured.Unstructured {
	t.Helper()
	out, err := testcluster.Samples()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// applyGraph creates the sample graph and the Secrets it references in ns. edit may change any
// object before it is created; returning false for an object leaves it out.
func applyGraph(t *testing.T, ns string, lic []byte, edit func(kind string, u *unstructured.Unstructured) bool) {
	t.Helper()
	applyGraphAs(t, k8s, ns, lic, edit)
}

// applyGraphAs is applyGraph with the given client (a tenant's, for example).
func applyGraphAs(t *testing.T, k8s client.Client, ns string, lic []byte, edit func(kind string, u *unstructured.Unstructured) bool) {
	t.Helper()
	ctx := context.Background()
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Name: "acme-license"}, Data: map[string][]byte{"license": lic}},
		{ObjectMeta: metav1.ObjectMeta{Name: "orders-upstream-credentials"}, Data: map[string][]byte{"username": []byte("orders"), "password": []byte("s3cret-orders")}},
		{ObjectMeta: metav1.ObjectMeta{Name: "reporting-upstream-credentials"}, Data: map[string][]byte{"username": []byte("rep"), "password": []byte("s3cret-rep")}},
		{ObjectMeta: metav1.ObjectMeta{Name: "pii-salt"}, Data: map[string][]byte{"salt": []byte("pepper")}},
	} {
		s.Namespace = ns
		if err := k8s.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	for kind, u := range sampleGraph(t) {
		if k, _ := catalog.Lookup(kind); k.Support != catalog.Reconciled {
			continue
		}
		if edit != nil && !edit(kind, u) {
			continue
		}
		u.SetNamespace(ns)
		if err := k8s.Create(ctx, u); err != nil {
			t.Fatalf("create %s: %v", kind, err)
		}
	}
}

// reconcileTotal sums controller-runtime's reconcile counter for a controller in this process.
func reconcileTotal(controller string) float64 {
	families, err := metrics.Registry.Gather()
	if err != nil {
		return 0
	}
	var sum float64
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == controller {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum
}
