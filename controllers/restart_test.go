package controllers_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/catalog"
	"github.com/nexo-io/nexo-edge/contract/signature"
	"github.com/nexo-io/nexo-edge/controllers"
	"github.com/nexo-io/nexo-edge/operator"
)

// quiesce waits until the operator has made no mutating call for quiet.
func quiesce(t *testing.T, o *runningOperator, quiet, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	last, since := o.mutating.Load(), time.Now()
	for time.Since(since) < quiet {
		if time.Now().After(deadline) {
			t.Fatalf("operator never went quiet; last writes: %v", o.lastWrites(10))
		}
		time.Sleep(200 * time.Millisecond)
		if n := o.mutating.Load(); n != last {
			last, since = n, time.Now()
		}
	}
}

func (o *runningOperator) lastWrites(n int) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.writes[max(0, len(o.writes)-n):]
}

func TestRestartOverConvergedProxiesWritesNothing(t *testing.T) {
	ns := "restart"
	applyGraph(t, ns, validLicense(t), nil)
	waitProxy(t, ns, 2*time.Minute, "Ready", isReady)
	quiesce(t, op, 3*time.Second, 2*time.Minute)

	var proxies nexov1alpha1.NexoProxyList
	if err := k8s.List(context.Background(), &proxies); err != nil {
		t.Fatal(err)
	}
	inScope := slices.DeleteFunc(proxies.Items, func(p nexov1alpha1.NexoProxy) bool { return !slices.Contains(watched, p.Namespace) })

	if op.mutating.Load() == 0 {
		t.Fatal("the counting transport saw no writes while the graphs converged; it counts nothing")
	}
	if err := op.stop(); err != nil {
		t.Fatal(err)
	}
	before := reconcileTotal("nexoproxies")
	var err error
	if op, err = startOperator(filepath.Join(cluster.Dir, "license-vendor.pem")); err != nil {
		t.Fatal(err)
	}
	// Wait until the new operator has reconciled every proxy in scope, then stay a while.
	err = wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return reconcileTotal("nexoproxies")-before >= float64(len(inScope)), nil
	})
	if err != nil {
		t.Fatalf("the restarted operator reconciled %v of %d proxies", reconcileTotal("nexoproxies")-before, len(inScope))
	}
	time.Sleep(3 * time.Second)
	if n := op.mutating.Load(); n != 0 {
		t.Errorf("restart over %d converged proxies made %d mutating API calls: %v", len(inScope), n, op.lastWrites(20))
	}
	t.Logf("restart: %d proxies in scope, %v reconciles, %d mutating calls", len(inScope), reconcileTotal("nexoproxies")-before, op.mutating.Load())
}

// A restarted operator trusts its metadata caches only after it has compared every child in
// full once, so drift made while it was down is corrected too.
func TestDriftWhileStoppedIsCorrectedAfterRestart(t *testing.T) {
	ns := "drift-stopped"
	applyGraph(t, ns, validLicense(t), nil)
	waitProxy(t, ns, 2*time.Minute, "Ready", isReady)
	quiesce(t, op, 2*time.Second, 2*time.Minute)
	if err := op.stop(); err != nil {
		t.Fatal(err)
	}
	tamperChildren(t, ns)
	var err error
	if op, err = startOperator(filepath.Join(cluster.Dir, "license-vendor.pem")); err != nil {
		t.Fatal(err)
	}
	waitChildrenCorrected(t, ns)
	waitProxy(t, ns, 2*time.Minute, "Ready again", isReady)
}

func TestOperatorRegistersExactlyTheReconciledKinds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, kinds, err := operator.New(ctx, cluster.Config, operator.Config{MetricsAddr: "0", ProbeAddr: "0", OperatorNamespace: operatorNamespace, TrustedKeysSecret: "nexo-trusted-keys", SkipNameValidation: true})
	if err != nil {
		t.Fatal(err)
	}
	want := catalog.WithSupport(catalog.Reconciled)
	if !slices.Equal(kinds, want) || len(kinds) != 18 {
		t.Errorf("registered %v, want the catalog's 18 reconciled kinds %v", kinds, want)
	}
	for _, k := range catalog.WithSupport(catalog.SchemaOnly) {
		if slices.Contains(kinds, k) {
			t.Errorf("schema-only kind %s registered", k)
		}
	}
}

func TestTrustedKeysAreReReadWhenTheSecretChanges(t *testing.T) {
	ns := "tamper" // reuses the tamper namespace's objects: add a managed step signed by a new key
	ctx := context.Background()
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	ml := sampleGraph(t)["NexoResponseLimit"]
	ml.SetName("rotated-key-limit")
	ml.SetNamespace(ns)
	if err := signature.Sign(ml, priv, signedFor(1)); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Create(ctx, ml); err != nil {
		t.Fatal(err)
	}
	readyReasonOf := func() string {
		obj := &nexov1alpha1.NexoResponseLimit{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(ml), obj); err != nil {
			return ""
		}
		if c := meta.FindStatusCondition(obj.Status.Conditions, "Ready"); c != nil {
			return c.Reason
		}
		return ""
	}
	waitFor := func(reason string) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			return readyReasonOf() == reason, nil
		}); err != nil {
			t.Fatalf("Ready reason %q, want %q", readyReasonOf(), reason)
		}
	}
	waitFor(nexov1alpha1.ReasonUnknownSigningKey)

	keys := &corev1.Secret{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: "nexo-trusted-keys"}, keys); err != nil {
		t.Fatal(err)
	}
	keys.Data["rotated.pem"] = signature.MarshalPublicKey(pub)
	if err := k8s.Update(ctx, keys); err != nil {
		t.Fatal(err)
	}
	waitFor(nexov1alpha1.ReasonValid)

	// A second object signed by the same key, without the managed-by label: it is verified all
	// the same, and revoking the key re-checks it too (not only labelled objects).
	bare := sampleGraph(t)["NexoResponseLimit"]
	bare.SetName("unlabelled-signed-limit")
	bare.SetNamespace(ns)
	if err := signature.Sign(bare, priv, signedFor(1)); err != nil {
		t.Fatal(err)
	}
	bare.SetLabels(nil)
	if err := k8s.Create(ctx, bare); err != nil {
		t.Fatal(err)
	}
	bareReason := func() string {
		obj := &nexov1alpha1.NexoResponseLimit{}
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(bare), obj); err != nil {
			return ""
		}
		if c := meta.FindStatusCondition(obj.Status.Conditions, nexov1alpha1.ConditionSignatureValid); c != nil && c.Status == metav1.ConditionTrue {
			return "signed"
		} else if c != nil {
			return c.Reason
		}
		return ""
	}
	waitBare := func(want string) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			return bareReason() == want, nil
		}); err != nil {
			t.Fatalf("unlabelled signed object: SignatureValid %q, want %q", bareReason(), want)
		}
	}
	waitBare("signed")
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: "nexo-trusted-keys"}, keys); err != nil {
		t.Fatal(err)
	}
	delete(keys.Data, "rotated.pem") // revoke
	if err := k8s.Update(ctx, keys); err != nil {
		t.Fatal(err)
	}
	waitFor(nexov1alpha1.ReasonUnknownSigningKey)
	waitBare(nexov1alpha1.ReasonUnknownSigningKey)
}

func TestProxyPhaseMetrics(t *testing.T) {
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, f := range families {
		if strings.HasPrefix(f.GetName(), "nexo_") {
			found[f.GetName()] = true
		}
		if f.GetName() == "nexo_proxies" {
			for _, m := range f.GetMetric() {
				if m.GetLabel()[0].GetValue() == "Ready" && m.GetGauge().GetValue() < 1 {
					t.Errorf("nexo_proxies{phase=Ready} = %v, want at least 1", m.GetGauge().GetValue())
				}
			}
		}
	}
	if !found["nexo_proxies"] || !found["nexo_graph_resolution_failures_total"] {
		t.Errorf("nexo_ metrics missing: %v", found)
	}
}

// TestRequireSignaturesRefusesUnsigned checks the verdict function the controllers share: with
// --require-signatures an unmanaged, unsigned object is refused with an actionable reason.
func TestRequireSignaturesRefusesUnsigned(t *testing.T) {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("nexo.io/v1alpha1")
	u.SetKind("NexoRateLimit")
	obj := &nexov1alpha1.NexoRateLimit{Spec: nexov1alpha1.NexoRateLimitSpec{OperationsPerSecond: 1}}
	obj.Name, obj.Namespace = "x", "y"
	if reason := controllers.SignatureVerdict(obj, &controllers.TrustedKeys{}, false); reason != "" {
		t.Errorf("unmanaged object without --require-signatures: %q, want accepted", reason)
	}
	if reason := controllers.SignatureVerdict(obj, &controllers.TrustedKeys{}, true); reason != nexov1alpha1.ReasonUnsigned {
		t.Errorf("with --require-signatures: %q, want %s", reason, nexov1alpha1.ReasonUnsigned)
	}
	if !meta.IsStatusConditionFalse(obj.Status.Conditions, nexov1alpha1.ConditionSignatureValid) {
		t.Errorf("SignatureValid not False: %+v", obj.Status.Conditions)
	}
}
