package reliability_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/contract/license"
	"github.com/nexo-io/nexo-edge/contract/scheme"
	"github.com/nexo-io/nexo-edge/contract/signature"
	"github.com/nexo-io/nexo-edge/contract/wire"
	"github.com/nexo-io/nexo-edge/controllers/render"
	"github.com/nexo-io/nexo-edge/test/framework/fleet"
	"github.com/nexo-io/nexo-edge/test/framework/testcluster"
	"github.com/nexo-io/nexo-edge/test/framework/testinstall"
)

// environmentID is the Control Plane environment the test installs are bound to.
const environmentID = "0123456789ab"

// product is the chart installed into a fresh full local cluster, watching some namespaces,
// with a license authority whose licenses the operator trusts.
type product struct {
	cluster    *testcluster.Cluster
	admin      client.WithWatch
	dir        string
	licenseKey string // PEM file of the license authority's public key
	licenseDoc string // a license for every fleet entitlement and maxProxies proxies
	starts     int
	last       *testinstall.LocalPod // the operator started last
}

// install sets up the product bound to environmentID, with no Control Plane (the operator alone).
func install(t *testing.T, watch []string, maxProxies int, opts testcluster.Options) *product {
	t.Helper()
	return installFor(t, environmentID, watch, maxProxies, opts, nil)
}

// installFor installs the chart bound to environment env with extra values (for example the
// Manager's Control Plane URL).
func installFor(t *testing.T, env string, watch []string, maxProxies int, opts testcluster.Options, extra map[string]any) *product {
	t.Helper()
	ctx := context.Background()
	opts.Mode = testcluster.Full
	opts.CRDDirectoryPaths = []string{testcluster.CRDDir()}
	if len(opts.Nodes) == 0 {
		// Room for every proxy pod of two namespaces and a rollout's surge.
		opts.Nodes = make([]testcluster.Node, 1+2*maxProxies/testcluster.NodePods)
		for i := range opts.Nodes {
			opts.Nodes[i].Name = fmt.Sprintf("node-%d", i)
		}
	}
	c, err := testcluster.Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	admin, err := client.NewWithWatch(c.Config, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	p := &product{cluster: c, admin: admin, dir: t.TempDir()}
	for _, ns := range watch {
		if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := testinstall.Chart(c, testinstall.Namespace, testinstall.Values(env, watch, extra)); err != nil {
		t.Fatal(err)
	}
	if err := admin.Create(ctx, fleet.RegistrySecret(testinstall.Namespace)); err != nil {
		t.Fatal(err)
	}
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	p.licenseKey = filepath.Join(p.dir, "license-authority.pem")
	if err := os.WriteFile(p.licenseKey, signature.MarshalPublicKey(pub), 0o644); err != nil {
		t.Fatal(err)
	}
	if p.licenseDoc, err = license.Issue(license.Claims{Licensee: "Reliability", ExpiresAt: time.Now().Add(24 * time.Hour),
		Entitlements: fleet.Entitlements, MaxProxies: int32(maxProxies)}, priv); err != nil {
		t.Fatal(err)
	}
	return p
}

// startOperator runs the chart's operator Deployment as a local process (its ServiceAccount,
// args and env) and waits until it is ready. Leader election is off: one replica, restarted at
// once after a kill (the lease hand-over has its own test in test/e2e).
func (p *product) startOperator(t *testing.T, extra ...string) *testinstall.LocalPod {
	t.Helper()
	dir := p.podDir(t, "operator")
	args := append([]string{"--license-public-key=" + p.licenseKey, "--leader-elect=false"}, extra...)
	op := p.run(t, dir, "nexo-operator", bins["operator"], args)
	p.last = op
	return op
}

// startManager runs the chart's Manager Deployment as a local process, as it is installed
// (leader election on), and waits until it is ready (a heartbeat succeeded).
func (p *product) startManager(t *testing.T, extra ...string) *testinstall.LocalPod {
	t.Helper()
	// The suites scrape the Manager's metrics directly, over plain HTTP (as the operator's, with
	// --metrics-secure=false where they do); the authenticated endpoint is test/e2e's.
	return p.run(t, p.podDir(t, "manager"), "nexo-manager", bins["manager"], append([]string{"--metrics-secure=false"}, extra...))
}

// podDir is a new folder for one local pod (volumes, kubeconfig, log).
func (p *product) podDir(t *testing.T, name string) string {
	t.Helper()
	p.starts++
	dir := filepath.Join(p.dir, fmt.Sprintf("%s-%d", name, p.starts))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return dir
}

// startStandbyManager runs a second Manager from the chart's Deployment without waiting for it
// to be ready: while the other holds the Lease it does not heartbeat, so it never is.
func (p *product) startStandbyManager(t *testing.T) *testinstall.LocalPod {
	t.Helper()
	return p.runNoWait(t, p.podDir(t, "manager"), "nexo-manager", bins["manager"], nil)
}

func (p *product) run(t *testing.T, dir, deployment, binary string, args []string) *testinstall.LocalPod {
	t.Helper()
	pod := p.runNoWait(t, dir, deployment, binary, args)
	if err := pod.WaitReady(context.Background(), 2*time.Minute); err != nil {
		t.Fatalf("%s: %v", deployment, err)
	}
	return pod
}

func (p *product) runNoWait(t *testing.T, dir, deployment, binary string, args []string) *testinstall.LocalPod {
	t.Helper()
	pod, err := testinstall.RunDeployment(context.Background(), p.cluster.Config, testinstall.Namespace, deployment,
		testinstall.PodOptions{Dir: dir, Binary: binary, ExtraArgs: args})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pod.Stop)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s log tail:\n%s", deployment, testcluster.Tail(pod.LogPath, 25))
		}
	})
	return pod
}

// createFleet creates the shared graph and n proxies in ns.
func (p *product) createFleet(t *testing.T, ns string, n int) {
	t.Helper()
	ctx := context.Background()
	for _, o := range fleet.Graph(ns, p.licenseDoc) {
		if err := p.admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	if err := fleet.Parallel(n, 8, func(i int) error { return p.admin.Create(ctx, fleet.Proxy(ns, i)) }); err != nil {
		t.Fatal(err)
	}
}

// editSharedStep changes the step every proxy of ns uses (a new graph revision for all).
func (p *product) editSharedStep(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	rl := &nexov1alpha1.NexoRateLimit{}
	if err := p.admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: fleet.SharedStep}, rl); err != nil {
		t.Fatal(err)
	}
	rl.Spec.OperationsPerSecond++
	if err := p.admin.Update(ctx, rl); err != nil {
		t.Fatal(err)
	}
}

// converged counts the proxies of ns that are Ready with their desired revision available.
func (p *product) converged(ns string) int {
	var list nexov1alpha1.NexoProxyList
	if err := p.admin.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		return -1
	}
	n := 0
	for i := range list.Items {
		if fleet.Converged(&list.Items[i]) {
			n++
		}
	}
	return n
}

// settle waits until n proxies of ns are converged (on a revision other than not, when given)
// and the namespace runs exactly one Ready pod per proxy, none terminating.
func (p *product) settle(t *testing.T, ns string, n int, not string, timeout time.Duration) {
	t.Helper()
	ctx := context.Background()
	ok := func(x *nexov1alpha1.NexoProxy) bool { return fleet.Converged(x) && x.Status.GraphRevision != not }
	if err := fleet.Wait(ctx, p.admin, ns, n, timeout, ok); err != nil {
		t.Fatalf("%v\n%s", err, p.explain(ns, ok))
	}
	deadline := time.Now().Add(timeout)
	for {
		var pods corev1.PodList
		if err := p.admin.List(ctx, &pods, client.InNamespace(ns)); err == nil {
			ready := 0
			for _, pod := range pods.Items {
				if pod.DeletionTimestamp == nil && podReady(&pod) {
					ready++
				}
			}
			if ready == n && len(pods.Items) == n {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d pods, %d Ready, want %d", ns, len(pods.Items), ready, n)
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// explain describes a proxy of ns that is not ok yet and the last operator's log tail.
func (p *product) explain(ns string, ok func(*nexov1alpha1.NexoProxy) bool) string {
	var b strings.Builder
	var list nexov1alpha1.NexoProxyList
	if err := p.admin.List(context.Background(), &list, client.InNamespace(ns)); err == nil {
		for i := range list.Items {
			if x := &list.Items[i]; !ok(x) {
				st, _ := json.MarshalIndent(x.Status, "", "  ")
				fmt.Fprintf(&b, "%s/%s (generation %d) is not there yet:\n%s\n", ns, x.Name, x.Generation, st)
				break
			}
		}
	}
	if p.last != nil {
		fmt.Fprintf(&b, "operator log tail:\n%s", testcluster.Tail(p.last.LogPath, 30))
	}
	return b.String()
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// state is what a namespace's proxies converged to, without anything a clean run would do
// differently by chance (uids, times, cluster IPs): object kind/name → a summary of what matters.
type state map[string]string

// snapshot reads the end state of ns: every proxy's status, and every object the operator made
// there with its owner, content and (Deployments) generation, ReplicaSets and pods per proxy.
// Objects carrying the operator's labels without a live owning proxy are recorded as orphans.
func (p *product) snapshot(t *testing.T, ns string) state {
	t.Helper()
	ctx := context.Background()
	s := state{}
	var proxies nexov1alpha1.NexoProxyList
	must(t, p.admin.List(ctx, &proxies, client.InNamespace(ns)))
	uids := map[string]string{}
	for _, x := range proxies.Items {
		uids[string(x.UID)] = x.Name
		var conds []string
		for _, c := range x.Status.Conditions {
			conds = append(conds, fmt.Sprintf("%s=%s/%s", c.Type, c.Status, c.Reason))
		}
		sort.Strings(conds)
		s["NexoProxy/"+x.Name] = fmt.Sprintf("phase=%s graph=%s available=%s previous=%s ready=%d conditions=%s",
			x.Status.Phase, x.Status.GraphRevision, x.Status.AvailableRevision, x.Status.PreviousRevision, x.Status.ReadyReplicas, strings.Join(conds, ","))
	}
	owner := func(o metav1.Object) string {
		ref := metav1.GetControllerOf(o)
		if ref == nil || ref.Kind != "NexoProxy" || uids[string(ref.UID)] == "" || uids[string(ref.UID)] != o.GetLabels()[wire.ProxyLabel] {
			return "ORPHAN"
		}
		return uids[string(ref.UID)]
	}
	managed := client.MatchingLabels{render.ManagedByLabel: render.ManagedByValue}

	var deps appsv1.DeploymentList
	must(t, p.admin.List(ctx, &deps, client.InNamespace(ns), managed))
	for _, d := range deps.Items {
		var images []string
		for _, c := range d.Spec.Template.Spec.Containers {
			images = append(images, c.Image)
		}
		var volumes []string
		for _, v := range d.Spec.Template.Spec.Volumes {
			switch {
			case v.ConfigMap != nil:
				volumes = append(volumes, "cm:"+v.ConfigMap.Name)
			case v.Secret != nil:
				volumes = append(volumes, "secret:"+v.Secret.SecretName)
			}
		}
		s["Deployment/"+d.Name] = fmt.Sprintf("owner=%s generation=%d replicas=%d template=%s images=%v volumes=%v",
			owner(&d), d.Generation, ptrOr(d.Spec.Replicas), digest(d.Spec.Template.Annotations), images, volumes)
	}
	var rss appsv1.ReplicaSetList
	must(t, p.admin.List(ctx, &rss, client.InNamespace(ns), managed))
	perDeployment := map[string][2]int{}
	for _, rs := range rss.Items {
		ref := metav1.GetControllerOf(&rs)
		name := "ORPHAN"
		if ref != nil {
			name = ref.Name
		}
		c := perDeployment[name]
		c[0]++
		if ptrOr(rs.Spec.Replicas) > 0 {
			c[1]++
		}
		perDeployment[name] = c
	}
	for name, c := range perDeployment {
		s["ReplicaSets/"+name] = fmt.Sprintf("total=%d scaled-up=%d", c[0], c[1])
	}
	var svcs corev1.ServiceList
	must(t, p.admin.List(ctx, &svcs, client.InNamespace(ns), managed))
	for _, v := range svcs.Items {
		s["Service/"+v.Name] = fmt.Sprintf("owner=%s ports=%s selector=%s", owner(&v), digest(v.Spec.Ports), digest(v.Spec.Selector))
	}
	var cms corev1.ConfigMapList
	must(t, p.admin.List(ctx, &cms, client.InNamespace(ns), managed))
	for _, m := range cms.Items {
		s["ConfigMap/"+m.Name] = fmt.Sprintf("owner=%s immutable=%v data=%s", owner(&m), m.Immutable != nil && *m.Immutable, digest(m.Data))
	}
	var secrets corev1.SecretList
	must(t, p.admin.List(ctx, &secrets, client.InNamespace(ns), managed))
	for _, x := range secrets.Items {
		s["Secret/"+x.Name] = fmt.Sprintf("owner=%s type=%s data=%s", owner(&x), x.Type, digest(x.Data))
	}
	var pods corev1.PodList
	must(t, p.admin.List(ctx, &pods, client.InNamespace(ns)))
	perProxy := map[string]int{}
	for _, pod := range pods.Items {
		perProxy[pod.Labels[wire.ProxyLabel]]++
	}
	for name, c := range perProxy {
		s["Pods/"+name] = fmt.Sprint(c)
	}
	return s
}

// foreign lists objects with the operator's labels outside the given namespaces.
func (p *product) foreign(t *testing.T, namespaces ...string) []string {
	t.Helper()
	ctx := context.Background()
	managed := client.MatchingLabels{render.ManagedByLabel: render.ManagedByValue}
	var out []string
	for _, list := range []client.ObjectList{&appsv1.DeploymentList{}, &corev1.ServiceList{}, &corev1.ConfigMapList{}, &corev1.SecretList{}} {
		must(t, p.admin.List(ctx, list, managed))
		items, _ := metaItems(list)
		for _, o := range items {
			if !slices.Contains(namespaces, o.GetNamespace()) {
				out = append(out, fmt.Sprintf("%T %s/%s", list, o.GetNamespace(), o.GetName()))
			}
		}
	}
	return out
}

func metaItems(list client.ObjectList) ([]metav1.Object, error) {
	var out []metav1.Object
	switch l := list.(type) {
	case *appsv1.DeploymentList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case *corev1.ServiceList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case *corev1.ConfigMapList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	case *corev1.SecretList:
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	default:
		return nil, fmt.Errorf("unexpected list %T", list)
	}
	return out, nil
}

// diff lists the keys whose summaries differ between want and got, at most max of them.
func diff(want, got state, max int) []string {
	var out []string
	keys := map[string]bool{}
	for k := range want {
		keys[k] = true
	}
	for k := range got {
		keys[k] = true
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	for _, k := range sorted {
		if want[k] != got[k] {
			if len(out) == max {
				out = append(out, "…")
				break
			}
			out = append(out, fmt.Sprintf("%s:\n    want %q\n    got  %q", k, want[k], got[k]))
		}
	}
	return out
}

func digest(v any) string {
	b, _ := json.Marshal(v)
	sum := sha256.Sum256(b)
	return fmt.Sprintf("%x", sum[:6])
}

func ptrOr(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
