package manager_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/contract/protocol"
	"github.com/nexo-io/nexo-edge/contract/signature"
	"github.com/nexo-io/nexo-edge/contract/wire"
	"github.com/nexo-io/nexo-edge/manager"
)

// craftedCP answers every heartbeat with cmds (a compromised or buggy Control Plane) and records
// the acknowledgements.
type craftedCP struct {
	*httptest.Server
	mu   sync.Mutex
	cmds []protocol.Command
	acks map[string][]protocol.Ack
	body []byte // when set, the raw heartbeat answer
}

func newCraftedCP(t *testing.T, cmds ...protocol.Command) *craftedCP {
	c := &craftedCP{cmds: cmds, acks: map[string][]protocol.Ack{}}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c.mu.Lock()
		defer c.mu.Unlock()
		if strings.HasSuffix(r.URL.Path, "/ack") {
			var a protocol.Ack
			_ = json.NewDecoder(r.Body).Decode(&a)
			id := strings.Split(r.URL.Path, "/")[3]
			c.acks[id] = append(c.acks[id], a)
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if c.body != nil {
			_, _ = w.Write(c.body)
			return
		}
		_ = json.NewEncoder(w).Encode(protocol.HeartbeatResponse{NextHeartbeatSeconds: 1, Commands: c.cmds})
	}))
	t.Cleanup(c.Close)
	return c
}

func (c *craftedCP) lastAck(id string) protocol.Ack {
	c.mu.Lock()
	defer c.mu.Unlock()
	if a := c.acks[id]; len(a) > 0 {
		return a[len(a)-1]
	}
	return protocol.Ack{}
}

// signedManifest signs a NexoRateLimit the way the Control Plane does, for this environment.
func signedManifest(t *testing.T, name string, spec map[string]any, labels map[string]any, rev int64) json.RawMessage {
	t.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "nexo.io/v1alpha1", "kind": "NexoRateLimit",
		"metadata": map[string]any{"name": name, "namespace": "shop"}, "spec": spec}}
	if labels != nil {
		u.SetLabels(toStrings(labels))
	}
	if err := signature.Sign(u, cpKeyForTests, signature.Claims{Audience: envID, Revision: rev}); err != nil {
		t.Fatal(err)
	}
	if labels == nil { // Sign adds the managed-by label; a manifest without labels is the case under test
		u.SetLabels(nil)
	}
	raw, err := u.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func toStrings(m map[string]any) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = fmt.Sprint(v)
	}
	return out
}

// TestSignedManifestWithoutLabelsIsApplied: a correctly signed manifest with no labels at all
// once panicked the Manager (assignment to a nil map) before it acknowledged, so the command was
// redelivered forever. It is applied and acknowledged.
func TestSignedManifestWithoutLabelsIsApplied(t *testing.T) {
	cmd := protocol.Command{ID: "no-labels", Type: protocol.Deploy, Namespaces: []string{"shop"},
		Manifests: []json.RawMessage{signedManifest(t, "no-labels", map[string]any{"operationsPerSecond": int64(4)}, nil, 1)}}
	cp := newCraftedCP(t, cmd)
	round(t, newAgent(t, func(c *manager.Config) { c.ControlPlaneURL = cp.URL }))
	if ack := cp.lastAck("no-labels"); ack.Status != protocol.Applied {
		t.Fatalf("ack %+v", ack)
	}
	got := &nexov1alpha1.NexoRateLimit{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: "shop", Name: "no-labels"}, got); err != nil || got.Labels[wire.OwnerLabel] != "env-"+envID {
		t.Fatalf("applied object %v (%v)", got.Labels, err)
	}
}

// TestDeployIsAllOrNothing: the third manifest of a deploy is valid for the Manager's checks but
// refused by the API server (burst below operationsPerSecond): nothing is written, not even the
// first two, and the acknowledgement says which one and why.
func TestDeployIsAllOrNothing(t *testing.T) {
	ctx := context.Background()
	cmd := protocol.Command{ID: "all-or-nothing", Type: protocol.Deploy, Namespaces: []string{"shop"}, Manifests: []json.RawMessage{
		signedManifest(t, "aon-1", map[string]any{"operationsPerSecond": int64(4)}, map[string]any{}, 1),
		signedManifest(t, "aon-2", map[string]any{"operationsPerSecond": int64(5)}, map[string]any{}, 1),
		signedManifest(t, "aon-3", map[string]any{"operationsPerSecond": int64(50), "burst": int64(2)}, map[string]any{}, 1),
	}}
	cp := newCraftedCP(t, cmd)
	round(t, newAgent(t, func(c *manager.Config) { c.ControlPlaneURL = cp.URL }))
	ack := cp.lastAck("all-or-nothing")
	if ack.Status != protocol.Failed || !strings.Contains(ack.Message, "aon-3") || !strings.Contains(ack.Message, "nothing was applied") {
		t.Fatalf("ack %+v", ack)
	}
	for _, name := range []string{"aon-1", "aon-2", "aon-3"} {
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: "shop", Name: name}, &nexov1alpha1.NexoRateLimit{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s was written (%v)", name, err)
		}
	}
}

// TestOlderRevisionIsRefused: once revision 5 of an object is applied, a deploy carrying revision
// 3 of it (validly signed: an old command replayed) fails and changes nothing.
func TestOlderRevisionIsRefused(t *testing.T) {
	ctx := context.Background()
	newer := protocol.Command{ID: "rev-5", Type: protocol.Deploy, Namespaces: []string{"shop"},
		Manifests: []json.RawMessage{signedManifest(t, "revisioned", map[string]any{"operationsPerSecond": int64(9)}, map[string]any{}, 5)}}
	older := protocol.Command{ID: "rev-3", Type: protocol.Deploy, Namespaces: []string{"shop"},
		Manifests: []json.RawMessage{signedManifest(t, "revisioned", map[string]any{"operationsPerSecond": int64(1)}, map[string]any{}, 3)}}
	cp := newCraftedCP(t, newer, older)
	round(t, newAgent(t, func(c *manager.Config) { c.ControlPlaneURL = cp.URL }))
	if ack := cp.lastAck("rev-5"); ack.Status != protocol.Applied {
		t.Fatalf("revision 5: %+v", ack)
	}
	if ack := cp.lastAck("rev-3"); ack.Status != protocol.Failed || !strings.Contains(ack.Message, "older") {
		t.Fatalf("revision 3 after 5: %+v", ack)
	}
	got := &nexov1alpha1.NexoRateLimit{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "revisioned"}, got); err != nil || got.Spec.OperationsPerSecond != 9 {
		t.Fatalf("object after the replay: %+v (%v)", got.Spec, err)
	}
}

// TestOversizedAnswerIsRefused: a 64 MiB heartbeat answer is refused after the first 12 MiB,
// without decoding it, and the round fails with a clear error.
func TestOversizedAnswerIsRefused(t *testing.T) {
	cp := newCraftedCP(t)
	cp.body = append([]byte(`{"commands":[],"padding":"`), bytes.Repeat([]byte("x"), 64<<20)...)
	a := newAgent(t, func(c *manager.Config) {
		c.ControlPlaneURL = cp.URL
		c.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	})
	_, err := a.Round(context.Background())
	if err == nil || !strings.Contains(err.Error(), "exceeds") {
		t.Fatalf("64 MiB answer: %v", err)
	}
}

// TestRedeliveryAfterALostRecordIsIdempotent states the delivery guarantee: the Manager records a
// command's outcome before acknowledging it, but a kill -9 between applying and recording loses
// the record, and the Control Plane redelivers. The command is then applied again, and that is
// harmless: a deploy is a server-side apply of the same signed manifests (no change, no new
// resourceVersion), a rollout sets the same image, an uninstall of a deleted proxy is "already
// gone". Delivery is at-least-once with idempotent commands.
func TestRedeliveryAfterALostRecordIsIdempotent(t *testing.T) {
	ctx := context.Background()
	cmd := protocol.Command{ID: "redelivered", Type: protocol.Deploy, Namespaces: []string{"shop"},
		Manifests: []json.RawMessage{signedManifest(t, "redelivered", map[string]any{"operationsPerSecond": int64(6)}, map[string]any{}, 1)}}
	cp := newCraftedCP(t, cmd)
	a := newAgent(t, func(c *manager.Config) { c.ControlPlaneURL = cp.URL })
	round(t, a)
	first := &nexov1alpha1.NexoRateLimit{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "redelivered"}, first); err != nil {
		t.Fatal(err)
	}
	// The crash: the record of the outcome is lost.
	state := &corev1.ConfigMap{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: "nexo-system", Name: wire.ManagerStateConfigMap}, state); err != nil {
		t.Fatal(err)
	}
	delete(state.Data, "redelivered")
	if err := k8s.Update(ctx, state); err != nil {
		t.Fatal(err)
	}
	round(t, newAgent(t, func(c *manager.Config) { c.ControlPlaneURL = cp.URL }))
	again := &nexov1alpha1.NexoRateLimit{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "redelivered"}, again); err != nil {
		t.Fatal(err)
	}
	if again.ResourceVersion != first.ResourceVersion || again.Generation != first.Generation {
		t.Errorf("re-applying the same command changed the object: resourceVersion %s → %s", first.ResourceVersion, again.ResourceVersion)
	}
	cp.mu.Lock()
	acks := cp.acks["redelivered"]
	cp.mu.Unlock()
	if len(acks) != 2 || acks[0].Status != protocol.Applied || acks[1].Status != protocol.Applied {
		t.Errorf("acks %+v", acks)
	}
}

// TestOneActiveManager: two Managers contend for the Lease as the chart's ServiceAccount; only
// one runs at a time, and when it stops the other takes over.
func TestOneActiveManager(t *testing.T) {
	cs, err := kubernetes.NewForConfig(managerConfig)
	if err != nil {
		t.Fatal(err)
	}
	timings := manager.LeaseTimings{Duration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 250 * time.Millisecond}
	var mu sync.Mutex
	active, maxActive := 0, 0
	started := make(chan string, 2)
	cancels := map[string]context.CancelFunc{}
	for _, id := range []string{"manager-a", "manager-b"} {
		ctx, cancel := context.WithCancel(context.Background())
		cancels[id] = cancel
		go manager.RunElected(ctx, cs, "nexo-system", id, timings, logr.Discard(), func(ctx context.Context) {
			mu.Lock()
			active++
			maxActive = max(maxActive, active)
			mu.Unlock()
			started <- id
			<-ctx.Done()
			mu.Lock()
			active--
			mu.Unlock()
		})
	}
	defer func() {
		for _, c := range cancels {
			c()
		}
	}()
	var first string
	select {
	case first = <-started:
	case <-time.After(20 * time.Second):
		t.Fatal("no Manager became active")
	}
	time.Sleep(2 * timings.Duration) // the other must stay passive
	mu.Lock()
	if maxActive != 1 {
		t.Fatalf("%d Managers active at once", maxActive)
	}
	mu.Unlock()
	begin := time.Now()
	cancels[first]() // the active one stops (releases the Lease)
	select {
	case second := <-started:
		if second == first {
			t.Fatalf("%s started twice", first)
		}
		t.Logf("%s took over %s after %s stopped", second, time.Since(begin).Round(time.Millisecond), first)
	case <-time.After(20 * time.Second):
		t.Fatal("the second Manager never took over")
	}
	mu.Lock()
	defer mu.Unlock()
	if maxActive != 1 {
		t.Fatalf("%d Managers active at once", maxActive)
	}
}

// TestTrustedKeysAreFollowed: the Manager reads its trusted keys for every deploy, so a key added
// to (or removed from) the mounted Secret applies without a restart.
func TestTrustedKeysAreFollowed(t *testing.T) {
	keys := map[string]ed25519.PublicKey{}
	var mu sync.Mutex
	cp := newCraftedCP(t)
	a := newAgent(t, func(c *manager.Config) {
		c.ControlPlaneURL = cp.URL
		c.TrustedKeys = func() (map[string]ed25519.PublicKey, error) {
			mu.Lock()
			defer mu.Unlock()
			return maps.Clone(keys), nil
		}
	})
	deploy := func(id string) protocol.Ack {
		cp.mu.Lock()
		cp.cmds = []protocol.Command{{ID: id, Type: protocol.Deploy, Namespaces: []string{"shop"},
			Manifests: []json.RawMessage{signedManifest(t, "followed-"+id, map[string]any{"operationsPerSecond": int64(2)}, map[string]any{}, 1)}}}
		cp.mu.Unlock()
		round(t, a)
		return cp.lastAck(id)
	}
	if ack := deploy("before"); ack.Status != protocol.Failed || !strings.Contains(ack.Message, "not trusted") {
		t.Fatalf("deploy without the key: %+v", ack)
	}
	mu.Lock()
	keys[signature.KeyID(cpPub)] = cpPub
	mu.Unlock()
	if ack := deploy("after"); ack.Status != protocol.Applied {
		t.Fatalf("deploy once the key is trusted, same Manager: %+v", ack)
	}
}

// TestConfigurationWithoutAControlPlaneURLIsRefused: there is no product default for the Control
// Plane (no historical host is a contract). A URL that is not one is refused at start; no URL at
// all is valid, and the Manager waits for one (TestManagerReportsWhatItsConfigurationLacks).
func TestConfigurationWithoutAControlPlaneURLIsRefused(t *testing.T) {
	for url, want := range map[string]string{
		"":                        "",
		"cp.example.com":          "not an http(s) URL",
		"ftp://cp.example.com":    "not an http(s) URL",
		"https://cp.example.com/": "",
	} {
		err := manager.Config{ControlPlaneURL: url, TokenFile: "/t"}.Validate()
		if (want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), want)) {
			t.Errorf("URL %q: %v, want %q", url, err, want)
		}
	}
}

// TestLegacyWorkloadConfigurationIsRefusedWithAReason: earlier Managers applied legacy workload
// configuration. This one refuses it, and says what to send instead, rather than a
// generic "unknown command".
func TestLegacyWorkloadConfigurationIsRefusedWithAReason(t *testing.T) {
	cp := newCraftedCP(t, protocol.Command{ID: "legacy", Type: protocol.WorkloadConfig})
	round(t, newAgent(t, func(c *manager.Config) { c.ControlPlaneURL = cp.URL }))
	ack := cp.lastAck("legacy")
	if ack.Status != protocol.Failed || !strings.Contains(ack.Message, "legacy workload configuration") || !strings.Contains(ack.Message, "deploy command") {
		t.Fatalf("ack %+v", ack)
	}
}

// TestSigningKeyRotationReachesTheCluster: the Control Plane advertises its signing keys in every
// heartbeat answer and the Manager keeps the trusted-keys Secret equal to them (it runs as the
// chart's ServiceAccount, whose rights on Secrets are that one Secret). A rotation has an
// overlap: objects signed by the old key stay valid and the new key signs new ones; retiring the
// old key removes it, and the operator (following the Secret, no restart) stops accepting what
// only it signed. Runs last: it retires the suite's key.
func TestSigningKeyRotationReachesTheCluster(t *testing.T) {
	ctx := context.Background()
	a := newAgent(t)
	deploy := func(name string) string {
		t.Helper()
		raw, _ := json.Marshal(map[string]any{"apiVersion": "nexo.io/v1alpha1", "kind": "NexoRateLimit",
			"metadata": map[string]any{"name": name, "namespace": "shop"}, "spec": map[string]any{"operationsPerSecond": 3}})
		id := enqueue(t, protocol.Command{Type: protocol.Deploy, Namespaces: []string{"shop"}, Manifests: []json.RawMessage{raw}})
		round(t, a)
		if c := commandStatus(t, id); c.Status != protocol.Applied {
			t.Fatalf("deploy %s: %+v", name, c)
		}
		return name
	}
	secretKeys := func() []string {
		s := &corev1.Secret{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: "nexo-system", Name: "nexo-trusted-keys"}, s); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for name := range s.Data {
			if strings.HasPrefix(name, "control-plane-") {
				ids = append(ids, strings.TrimSuffix(strings.TrimPrefix(name, "control-plane-"), ".pem"))
			}
		}
		sort.Strings(ids)
		return ids
	}
	verdict := func(name string) string {
		o := &nexov1alpha1.NexoRateLimit{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: "shop", Name: name}, o); err != nil {
			return err.Error()
		}
		if c := meta.FindStatusCondition(o.Status.Conditions, nexov1alpha1.ConditionSignatureValid); c != nil {
			return c.Reason
		}
		return ""
	}
	waitVerdict := func(name, want string) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			return verdict(name) == want, nil
		}); err != nil {
			t.Fatalf("%s: SignatureValid reason %q, want %q", name, verdict(name), want)
		}
	}
	// A missing trusted-keys Secret is reported, never created: the Manager may create no Secret
	// (every install path creates it). Deploys still verify with the advertised keys.
	keysSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "nexo-system", Name: "nexo-trusted-keys"}}
	if err := k8s.Delete(ctx, keysSecret); err != nil {
		t.Fatal(err)
	}
	deploy("while-the-secret-is-missing")
	logsMu.Lock()
	logged := logs.String()
	logsMu.Unlock()
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(keysSecret), &corev1.Secret{}); !apierrors.IsNotFound(err) {
		t.Fatalf("the Manager created the trusted-keys Secret (or the read failed: %v)", err)
	}
	if !strings.Contains(logged, "the trusted-keys Secret nexo-system/nexo-trusted-keys does not exist") ||
		!strings.Contains(logged, "kubectl -n nexo-system create secret generic nexo-trusted-keys") {
		t.Fatalf("a missing trusted-keys Secret was not reported with its fix; log:\n%s", logged)
	}
	// Trust bootstrap: the empty Secret an install creates; the Manager fills it from the channel.
	if err := k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "nexo-system", Name: "nexo-trusted-keys"}}); err != nil {
		t.Fatal(err)
	}
	oldID := signature.KeyID(cpPub)
	byOld := deploy("signed-by-old-key")
	if got := secretKeys(); len(got) != 1 || got[0] != oldID {
		t.Fatalf("trusted-keys Secret holds %v, want the Control Plane's key %s", got, oldID)
	}
	var rotated map[string]string
	if code := cp.admin("POST", "/admin/signing-keys/rotate", nil, &rotated); code != 200 {
		t.Fatalf("rotate: %d", code)
	}
	newID := rotated["keyId"]
	byNew := deploy("signed-by-new-key") // signed with the new key, verified with the advertised set
	if got := secretKeys(); len(got) != 2 || !slices.Contains(got, oldID) || !slices.Contains(got, newID) {
		t.Fatalf("during the overlap the Secret holds %v, want both %s and %s", got, oldID, newID)
	}
	waitVerdict(byOld, "Signed")
	waitVerdict(byNew, "Signed")

	if code := cp.admin("POST", "/admin/signing-keys/"+oldID+"/retire", nil, nil); code != 204 {
		t.Fatalf("retire: %d", code)
	}
	round(t, a)
	if got := secretKeys(); len(got) != 1 || got[0] != newID {
		t.Fatalf("after retiring the old key the Secret holds %v, want only %s", got, newID)
	}
	waitVerdict(byOld, "UnknownSigningKey")
	waitVerdict(byNew, "Signed")
}

// A Manager without its configuration (no Control Plane URL, no connect token) runs and is
// Ready, and says what is missing and where to create it: its status ConfigMap, an Event on its
// Deployment and the nexo_manager_condition metric. Each missing piece, once created, is picked
// up without a restart; then it heartbeats.
func TestManagerReportsWhatItsConfigurationLacks(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tokenFile := filepath.Join(t.TempDir(), "token")
	a := newAgent(t, func(c *manager.Config) { c.ControlPlaneURL, c.TokenFile = "", tokenFile })
	done := make(chan struct{})
	go func() { defer close(done); _ = a.Run(ctx) }()
	defer func() { cancel(); <-done }()
	status := func() map[string]string {
		cm := &corev1.ConfigMap{}
		_ = k8s.Get(ctx, client.ObjectKey{Namespace: "nexo-system", Name: wire.ManagerStatusConfigMap}, cm)
		return cm.Data
	}
	configured := func() string {
		families, _ := manager.Registry.Gather()
		for _, f := range families {
			if f.GetName() != "nexo_manager_condition" {
				continue
			}
			for _, m := range f.GetMetric() {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				if labels["condition"] == "Configured" && m.GetGauge().GetValue() == 1 {
					return labels["status"]
				}
			}
		}
		return ""
	}
	events := func(reason string) []string {
		list := &eventsv1.EventList{}
		_ = k8s.List(ctx, list, client.InNamespace("nexo-system"))
		var out []string
		for _, e := range list.Items {
			if e.Reason == reason && e.Regarding.Kind == "Deployment" && e.Regarding.Name == wire.ManagerName {
				out = append(out, e.Note)
			}
		}
		return out
	}
	waitFor(t, "the Manager says both what is missing and where", func() bool {
		st := status()
		return st[wire.StatusConfigured] == "false" && strings.Contains(st[wire.StatusNotConfigured], "ConfigMap nexo-manager-config in namespace nexo-system with the key controlPlaneURL") &&
			strings.Contains(st[wire.StatusNotConfigured], "Secret nexo-connect-token in namespace nexo-system with the key token") &&
			configured() == "false" && a.Configured() != nil
	})
	if err := a.Ready(); err != nil {
		t.Errorf("the unconfigured Manager is not Ready: %v", err)
	}
	waitFor(t, "an Event on the Manager's Deployment says what is missing", func() bool {
		notes := events("NotConfigured")
		return len(notes) > 0 && strings.Contains(notes[len(notes)-1], "nexo-manager-config")
	})
	cfg := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "nexo-system", Name: wire.InstallConfigMap}, Data: map[string]string{wire.ConfigControlPlane: "cp.example.com"}}
	if err := k8s.Create(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), cfg) })
	waitFor(t, "the Manager names the bad URL", func() bool {
		return strings.Contains(status()[wire.StatusNotConfigured], `"cp.example.com" is not an http(s) URL`)
	})
	cfg.Data[wire.ConfigControlPlane] = cp.srv.URL
	if err := k8s.Update(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "only the token is missing", func() bool {
		missing := status()[wire.StatusNotConfigured]
		return !strings.Contains(missing, "Control Plane URL") && strings.Contains(missing, "nexo-connect-token")
	})
	if err := os.WriteFile(tokenFile, []byte(token), 0o400); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the Manager is configured, heartbeats and says so", func() bool {
		st := status()
		return a.Ready() == nil && a.Configured() == nil && st[wire.StatusConfigured] == "true" && st[wire.StatusNotConfigured] == "" &&
			st[wire.StatusLastHeartbeatResult] == "ok" && configured() == "true" && len(events("Configured")) > 0
	})
	for _, note := range append(events("NotConfigured"), events("Configured")...) {
		if strings.Contains(note, token) {
			t.Errorf("an Event carries the connect token: %q", note)
		}
	}
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) { return ok(), nil }); err != nil {
		t.Fatalf("%s: not within 30s", what)
	}
}
