// Package scale_test measures the Manager's heartbeat against fleets of owned NexoProxies (API
// objects only: no operator, no pods), with the reference Control Plane and the Manager running
// as the chart's ServiceAccount. TestHeartbeatAt20000Proxies is part of make test;
// BenchmarkHeartbeat (make bench-heartbeat) reports heartbeat bytes and the Manager process's
// memory at 1,000, 5,000 and 20,000 proxies.
package scale_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/contract/scheme"
	"github.com/nexo-io/nexo-edge/contract/wire"
	"github.com/nexo-io/nexo-edge/controlplane"
	"github.com/nexo-io/nexo-edge/manager"
	"github.com/nexo-io/nexo-edge/test/framework/testcluster"
	"github.com/nexo-io/nexo-edge/test/framework/testcontrolplane"
	"github.com/nexo-io/nexo-edge/test/framework/testinstall"
)

const (
	fleetNS    = "fleet"
	adminToken = "scale-admin-token-0123456789"
)

var (
	cluster *testcluster.Cluster
	admin   client.Client
	cpURL   string
	envID   string
	token   string
	// beats are the body sizes of the heartbeats the Control Plane received, in order.
	beatsMu sync.Mutex
	beats   []int
	created int // proxies created so far, named p-00000 onwards
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	if testcluster.Fuzzing() {
		return m.Run()
	}
	ctrllog.SetLogger(logr.Discard())
	ctx := context.Background()
	var err error
	cluster, err = testcluster.Start(ctx, testcluster.Options{Mode: testcluster.Envtest, CRDDirectoryPaths: []string{testcluster.CRDDir()}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cluster.Stop()
	if admin, err = client.New(cluster.Config, client.Options{Scheme: scheme.New()}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cp, err := testcontrolplane.Start(testcontrolplane.Options{DB: filepath.Join(cluster.Dir, "cp.db"), AdminToken: adminToken, NextHeartbeat: time.Second,
		Wrap: func(real http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/v1/heartbeat" {
					body, _ := io.ReadAll(r.Body)
					beatsMu.Lock()
					beats = append(beats, len(body))
					beatsMu.Unlock()
					r.Body = io.NopCloser(bytes.NewReader(body))
				}
				real.ServeHTTP(w, r)
			})
		}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cp.Stop()
	cpURL = cp.URL
	var env controlplane.NewEnvironment
	if err := (controlplane.AdminClient{URL: cpURL, Token: adminToken}).Do("POST", "/admin/environments", map[string]string{"name": "scale"}, &env); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	envID, token = env.ID, env.Token
	if err := testinstall.Chart(cluster, testinstall.Namespace, testinstall.Values(envID, nil, nil)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fleetNS}}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// growFleet creates owned NexoProxies until there are n.
func growFleet(tb testing.TB, n int) {
	tb.Helper()
	ctx := context.Background()
	work := make(chan int)
	errs := make(chan error, 16)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				p := &nexov1alpha1.NexoProxy{
					ObjectMeta: metav1.ObjectMeta{Namespace: fleetNS, Name: fmt.Sprintf("p-%05d", i), Labels: map[string]string{wire.OwnerLabel: "env-" + envID}},
					Spec: nexov1alpha1.NexoProxySpec{PipelineRef: nexov1alpha1.LocalObjectReference{Name: "orders"}, ProfileRef: nexov1alpha1.LocalObjectReference{Name: "standard"},
						LicenseRef: nexov1alpha1.LocalObjectReference{Name: "acme"}, Upstream: nexov1alpha1.Target{Name: "primary", Address: "mongo-0.mongo.db.svc:27017"}},
				}
				if err := admin.Create(ctx, p); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
	for i := created; i < n; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		tb.Fatal(err)
	default:
	}
	created = max(created, n)
}

// managerConfig authenticates as the chart's nexo-manager ServiceAccount.
func managerConfig(tb testing.TB) *rest.Config {
	tb.Helper()
	cfg, err := testinstall.Manager(context.Background(), cluster)
	if err != nil {
		tb.Fatal(err)
	}
	return cfg
}

func newManager(t *testing.T) *manager.Agent {
	t.Helper()
	cfg := managerConfig(t)
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o400); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	d, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return manager.NewAgent(manager.Config{TokenFile: tokenFile, ControlPlaneURL: cpURL, Namespace: testinstall.Namespace, Version: "scale",
		RESTConfig: cfg, Log: logr.Discard()}, c, d)
}

func view(tb testing.TB) controlplane.EnvironmentView {
	tb.Helper()
	var v controlplane.EnvironmentView
	if err := (controlplane.AdminClient{URL: cpURL, Token: adminToken}).Do("GET", "/admin/environments/"+envID, nil, &v); err != nil {
		tb.Fatal(err)
	}
	return v
}

// lastBeats returns the body sizes of the heartbeats received since mark.
func beatsSince(mark int) []int {
	beatsMu.Lock()
	defer beatsMu.Unlock()
	return append([]int(nil), beats[mark:]...)
}

func beatCount() int {
	beatsMu.Lock()
	defer beatsMu.Unlock()
	return len(beats)
}

// TestHeartbeatAt20000Proxies: a Manager owning 20,000 NexoProxies reports them all, in
// heartbeats that each stay far below the Control Plane's 1 MiB limit (a full list would be
// about 2.3 MB); once reported, a heartbeat carries only what changed (nothing, a few status
// changes, a deletion); a restarted Manager reports everything again and the Control Plane
// follows.
func TestHeartbeatAt20000Proxies(t *testing.T) {
	ctx := context.Background()
	const n = 20000
	growFleet(t, n)
	a := newManager(t)
	mark := beatCount()
	reportAll := func(want int) {
		t.Helper()
		for range 30 {
			if _, err := a.Round(ctx); err != nil {
				t.Fatal(err)
			}
			if v := view(t); v.InventoryComplete && v.Inventory != nil && len(v.Inventory.Deployments) == want && v.Inventory.ManagedProxies == want {
				return
			}
		}
		v := view(t)
		t.Fatalf("the Control Plane holds %d proxies (complete %v) after 30 heartbeats, want %d", len(v.Inventory.Deployments), v.InventoryComplete, want)
	}
	reportAll(n)
	report := beatsSince(mark)
	total := 0
	for _, b := range report {
		total += b
		if b >= 1<<20 {
			t.Errorf("a heartbeat of %d bytes: over the Control Plane's 1 MiB limit", b)
		}
	}
	t.Logf("report of %d proxies: %d heartbeats, %d bytes in all, largest %d", n, len(report), total, maxOf(report))

	// Nothing changed: a heartbeat carries no proxy.
	mark = beatCount()
	for range 2 {
		if _, err := a.Round(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range beatsSince(mark) {
		if b > 4096 {
			t.Errorf("an unchanged fleet of %d proxies heartbeats %d bytes, want under 4 KiB", n, b)
		}
	}
	steady := beatsSince(mark)

	// Three status changes and two deletions: exactly those travel.
	for _, name := range []string{"p-00001", "p-10002", "p-19999"} {
		p := &nexov1alpha1.NexoProxy{}
		if err := admin.Get(ctx, client.ObjectKey{Namespace: fleetNS, Name: name}, p); err != nil {
			t.Fatal(err)
		}
		p.Status.Replicas, p.Status.ReadyReplicas, p.Status.GraphRevision = 2, 2, "abc123def456"
		if err := admin.Status().Update(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"p-00003", "p-00004"} {
		if err := admin.Delete(ctx, &nexov1alpha1.NexoProxy{ObjectMeta: metav1.ObjectMeta{Namespace: fleetNS, Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	created = n // names stay taken; the fleet is n-2 from here
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		if _, err := a.Round(ctx); err != nil {
			return false, err
		}
		v := view(t)
		ready := 0
		for _, d := range v.Inventory.Deployments {
			if d.ReadyReplicas == 2 && d.GraphRevision == "abc123def456" {
				ready++
			}
		}
		return v.InventoryComplete && len(v.Inventory.Deployments) == n-2 && ready == 3, nil
	}); err != nil {
		v := view(t)
		t.Fatalf("the Control Plane did not follow 3 status changes and 2 deletions: %d proxies, complete %v", len(v.Inventory.Deployments), v.InventoryComplete)
	}

	// A restarted Manager knows nothing of what the Control Plane holds: it reports from the
	// empty inventory again, and the Control Plane ends with the same fleet.
	b := newManager(t)
	for range 30 {
		if _, err := b.Round(ctx); err != nil {
			t.Fatal(err)
		}
		if v := view(t); v.InventoryComplete && len(v.Inventory.Deployments) == n-2 {
			t.Logf("steady heartbeats: %v bytes", steady)
			return
		}
	}
	t.Fatalf("after a Manager restart the Control Plane holds %d proxies, want %d", len(view(t).Inventory.Deployments), n-2)
}

func maxOf(xs []int) int {
	m := 0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

// BenchmarkHeartbeat runs the Manager binary (as the chart's ServiceAccount) against fleets of
// 1,000, 5,000 and 20,000 owned proxies and reports: the bytes of its first report of the fleet
// (all heartbeats until the Control Plane holds every proxy), of a heartbeat once nothing
// changes, and the process's resident memory then (VmRSS) and at its peak (VmHWM). Run once:
// go test ./test/scale -run '^$' -bench . -benchtime 1x (make bench-heartbeat). A Manager
// that predates inventory.delta sends full lists, which the Control Plane refuses over 1 MiB.
func BenchmarkHeartbeat(b *testing.B) {
	// NEXO_BENCH_MANAGER runs another Manager binary instead (an earlier release, to compare).
	bin := os.Getenv("NEXO_BENCH_MANAGER")
	if bin == "" {
		bin = filepath.Join(b.TempDir(), "manager")
		build := exec.Command("go", "build", "-o", bin, "./cmd/manager")
		build.Dir = testcluster.RepoRoot()
		if out, err := build.CombinedOutput(); err != nil {
			b.Fatalf("build the Manager: %v\n%s", err, out)
		}
	}
	for _, n := range []int{1000, 5000, 20000} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			if created > n {
				b.Skipf("the fleet already holds %d proxies", created)
			}
			growFleet(b, n)
			for range b.N {
				benchManager(b, bin, n)
			}
		})
	}
}

func benchManager(b *testing.B, bin string, n int) {
	dir := b.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := testcluster.WriteKubeconfig(kubeconfig, "manager", managerConfig(b)); err != nil {
		b.Fatal(err)
	}
	tokenFile := filepath.Join(dir, "token")
	_ = os.WriteFile(tokenFile, []byte(token), 0o400)
	mark := beatCount()
	cmd := exec.Command(bin, "--control-plane-url="+cpURL, "--token-file="+tokenFile, "--namespace="+testinstall.Namespace,
		"--trusted-keys-secret=", "--trusted-keys-dir="+dir, "--leader-elect=false", "--metrics-bind-address=0", "--health-probe-bind-address=0")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	if err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 3*time.Minute, true, func(context.Context) (bool, error) {
		v := view(b)
		return v.InventoryComplete && v.Inventory != nil && len(v.Inventory.Deployments) == n && beatCount() > mark, nil
	}); err != nil {
		b.Fatalf("the Control Plane never held the %d proxies; Manager log:\n%s", n, logs.String())
	}
	report := beatsSince(mark)
	reportBytes := 0
	for _, x := range report {
		reportBytes += x
	}
	time.Sleep(3 * time.Second) // a few steady heartbeats (the Control Plane asks for one a second)
	steady := beatsSince(mark + len(report))
	if len(steady) == 0 {
		b.Fatal("no heartbeat once the fleet was reported")
	}
	rss, hwm := procMemory(b, cmd.Process.Pid)
	b.ReportMetric(float64(reportBytes), "report-B")
	b.ReportMetric(float64(len(report)), "report-beats")
	b.ReportMetric(float64(steady[len(steady)-1]), "steady-beat-B")
	b.ReportMetric(rss/(1<<20), "rss-MiB")
	b.ReportMetric(hwm/(1<<20), "peak-rss-MiB")
}

// procMemory reads VmRSS and VmHWM (bytes) of a process.
func procMemory(b *testing.B, pid int) (rss, hwm float64) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "VmRSS:":
			rss = kb * 1024
		case "VmHWM:":
			hwm = kb * 1024
		}
	}
	return rss, hwm
}
