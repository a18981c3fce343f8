package reliability_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/contract/protocol"
	"github.com/nexo-io/nexo-edge/contract/wire"
	"github.com/nexo-io/nexo-edge/test/framework/testcluster"
	"github.com/nexo-io/nexo-edge/test/framework/testinstall"
)

// Faults the link between the Manager and the Control Plane injects.
const (
	faultNone   = ""
	fault5xx    = "5xx"     // every request answered 503
	faultHang   = "hang"    // requests held beyond the Manager's 15 s client timeout
	faultDrop   = "drop"    // the connection closed without an answer
	faultAck5xx = "ack-5xx" // heartbeats pass, acknowledgements answered 503
	// cpRestart stops the Control Plane process (the link then answers 502) and starts it again.
	cpRestart = "restart"
)

// faultyLink is an HTTP proxy between the Manager and the Control Plane that injects a fault.
type faultyLink struct {
	srv     *http.Server
	addr    string
	proxy   *httputil.ReverseProxy
	mu      sync.Mutex
	fault   string
	faulted int // requests that met the current fault
}

func newFaultyLink(t *testing.T, target string) *faultyLink {
	t.Helper()
	u, err := url.Parse(target)
	must(t, err)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	l := &faultyLink{addr: lis.Addr().String(), proxy: httputil.NewSingleHostReverseProxy(u)}
	l.proxy.ErrorLog = log.New(io.Discard, "", 0) // a stopped Control Plane is a 502, on purpose
	l.srv = &http.Server{Handler: l}
	go func() { _ = l.srv.Serve(lis) }()
	t.Cleanup(func() { _ = l.srv.Close() })
	return l
}

func (l *faultyLink) url() string { return "http://" + l.addr }

func (l *faultyLink) set(fault string) {
	l.mu.Lock()
	l.fault, l.faulted = fault, 0
	l.mu.Unlock()
}

func (l *faultyLink) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.faulted
}

func (l *faultyLink) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	l.mu.Lock()
	fault := l.fault
	if fault == faultAck5xx && !strings.HasSuffix(r.URL.Path, "/ack") {
		fault = faultNone
	}
	if fault != faultNone {
		l.faulted++
	}
	l.mu.Unlock()
	switch fault {
	case fault5xx, faultAck5xx:
		http.Error(w, `{"error":"injected: service unavailable"}`, http.StatusServiceUnavailable)
	case faultHang:
		select {
		case <-r.Context().Done(): // the Manager gave up (its client timeout)
		case <-time.After(time.Minute):
		}
	case faultDrop:
		if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
			_ = conn.Close()
		}
	default:
		l.proxy.ServeHTTP(w, r)
	}
}

// TestControlPlaneFaults: the Manager behind a link that fails in every way a network and a
// Control Plane can (5xx, hangs past its client timeout, dropped connections, lost
// acknowledgements, a Control Plane restart with its data and one with its data lost). Each
// deploy queued during a fault is applied once and acknowledged after recovery; the heartbeat
// age is reported on both sides; running proxies are never touched (their Deployments keep
// their generation); the Manager never restarts.
func TestControlPlaneFaults(t *testing.T) {
	ctx := context.Background()
	cp := startControlPlane(t)
	link := newFaultyLink(t, cp.url())
	p, env := hosted(t, cp, link.url(), []string{"shop"}, 10, testcluster.Options{})
	must(t, p.admin.Create(ctx, licenseSecret("shop", p.licenseDoc)))
	p.startOperator(t)
	mgr := p.startManager(t)
	mgrPid := mgr.Pid()

	applied := func(id string) bool {
		for _, c := range cp.view(t, env).Commands {
			if c.ID == id {
				return c.Status == protocol.Applied
			}
		}
		return false
	}
	ready := func(name string) bool {
		x := &nexov1alpha1.NexoProxy{}
		return p.admin.Get(ctx, clientKey("shop", name), x) == nil && x.Status.Phase == nexov1alpha1.ProxyReady
	}
	generations := func() map[string]int64 {
		var list appsv1.DeploymentList
		must(t, p.admin.List(ctx, &list, client.InNamespace("shop")))
		out := map[string]int64{}
		for _, d := range list.Items {
			out[d.Name] = d.Generation
		}
		return out
	}
	untouched := func(before map[string]int64, when string) {
		t.Helper()
		now := generations()
		for name, g := range before {
			if now[name] != g {
				t.Errorf("%s: Deployment %s generation %d → %d", when, name, g, now[name])
			}
		}
	}

	// A running proxy, deployed while everything works.
	first := cp.deploy(t, env, "shop", "running")
	if err := waitUntil(2*time.Minute, func() bool { return applied(first) && ready("running") }); err != nil {
		t.Fatalf("the first deploy: %+v", cp.view(t, env).Commands)
	}

	type result struct{ fault, faulted, recovery, maxAge string }
	var results []result
	deployments := 1
	for _, fault := range []string{fault5xx, faultHang, faultDrop, faultAck5xx, cpRestart} {
		before := generations()
		name := "during-" + fault
		var id string
		start := time.Now()
		faulted := "-"
		if fault == cpRestart {
			cp.stop()
			time.Sleep(3 * time.Second) // heartbeats fail against a Control Plane that is down
			cp.start(t)
		} else {
			link.set(fault)
			// The deploy is queued while the link fails (the admin API is not behind the link).
			id = cp.deploy(t, env, "shop", name)
			want := 2
			if fault == faultAck5xx {
				want = 5 // the Manager's acknowledgement attempts for one delivery
			}
			if err := waitUntil(2*time.Minute, func() bool { return link.count() >= want }); err != nil {
				t.Fatalf("%s: the Manager sent %d requests into the fault", fault, link.count())
			}
			faulted = fmt.Sprint(link.count())
		}
		// The Manager reports the failure in its status ConfigMap; the Control Plane sees the
		// heartbeat age grow.
		status := &corev1.ConfigMap{}
		must(t, p.admin.Get(ctx, clientKey(testinstall.Namespace, wire.ManagerStatusConfigMap), status))
		if fault != faultAck5xx && status.Data[wire.StatusControlPlaneReachable] != "false" {
			t.Errorf("%s: the Manager's status says reachable %q (%q)", fault, status.Data[wire.StatusControlPlaneReachable], status.Data[wire.StatusLastHeartbeatResult])
		}
		var maxAge int64
		if v := cp.view(t, env); v.AgeSeconds != nil {
			maxAge = *v.AgeSeconds
		}
		link.set(faultNone)
		untouched(before, fault+" (during)")
		if id == "" {
			id = cp.deploy(t, env, "shop", name)
		}
		if err := waitUntil(3*time.Minute, func() bool { return applied(id) && ready(name) }); err != nil {
			t.Fatalf("%s: the deploy was not applied and acknowledged after recovery: %+v", fault, cp.view(t, env).Commands)
		}
		deployments++
		recovery := time.Since(start)
		if fault == faultAck5xx {
			var deliveries int
			for _, c := range cp.view(t, env).Commands {
				if c.ID == id {
					deliveries = c.Deliveries
				}
			}
			if deliveries < 2 {
				t.Errorf("the command whose acknowledgements were lost was delivered %d times, want a redelivery", deliveries)
			}
		}
		x := &nexov1alpha1.NexoProxy{}
		must(t, p.admin.Get(ctx, clientKey("shop", name), x))
		if x.Generation != 1 {
			t.Errorf("%s: the deployed proxy has generation %d: applied more than once", fault, x.Generation)
		}
		untouched(before, fault+" (after)")
		if v := cp.view(t, env); v.State != "healthy" {
			t.Errorf("%s: environment state %q after recovery", fault, v.State)
		}
		results = append(results, result{fault, faulted, recovery.Round(100 * time.Millisecond).String(), fmt.Sprintf("%ds", maxAge)})
	}
	var notApplied []string
	for _, c := range cp.view(t, env).Commands {
		if c.Status != protocol.Applied {
			notApplied = append(notApplied, c.ID+" "+c.Type+" "+string(c.Status)+" "+c.Message)
		}
	}
	if len(notApplied) > 0 {
		t.Errorf("commands not applied: %v", notApplied)
	}

	// The Control Plane restarts with its data lost: the environment and its token are gone, so
	// every heartbeat is refused (401). The Manager keeps running, says so, and touches nothing;
	// re-registering the environment is the Control Plane admin's job.
	before := generations()
	cp.stop()
	must(t, os.Remove(cp.db))
	// The audit checkpoint, outside the database, notices the lost history: serve refuses to
	// start and says how to start over on purpose, which the admin then does.
	out, err := exec.Command(bins["controlplane"], cp.serveArgs()...).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "removed from the end") || !strings.Contains(string(out), "move "+cp.db+".audit-checkpoint aside") {
		t.Errorf("serve on a lost database: %v\n%s", err, out)
	}
	must(t, os.Rename(cp.db+".audit-checkpoint", cp.db+".audit-checkpoint.lost"))
	cp.start(t)
	if err := waitUntil(2*time.Minute, func() bool {
		cm := &corev1.ConfigMap{}
		return p.admin.Get(ctx, clientKey(testinstall.Namespace, wire.ManagerStatusConfigMap), cm) == nil &&
			strings.Contains(cm.Data[wire.StatusLastHeartbeatResult], "401") && cm.Data[wire.StatusControlPlaneReachable] == "false"
	}); err != nil {
		cm := &corev1.ConfigMap{}
		_ = p.admin.Get(ctx, clientKey(testinstall.Namespace, wire.ManagerStatusConfigMap), cm)
		t.Errorf("after the data loss the Manager's status does not report the refused token: %v", cm.Data)
	}
	time.Sleep(5 * time.Second)
	untouched(before, "restart with data lost")
	results = append(results, result{"restart-data-lost", "-", "-", "-"})
	// Applied once: the Manager counts a command when it applies it, not when it acknowledges a
	// redelivery of one it already applied (the lost acknowledgements above were redelivered).
	m, err := scrape(mgr.MetricsAddr)
	must(t, err)
	if got := m["nexo_manager_commands_total"]; got != float64(deployments) {
		t.Errorf("the Manager applied %.0f commands; %d were queued", got, deployments)
	}

	if !mgr.Running() || mgr.Pid() != mgrPid {
		t.Error("the Manager restarted or exited during the faults")
	}
	figure(t, "Control Plane faults for the Manager", fmt.Sprintf("%d faults (5xx, hang past the 15 s client timeout, dropped connections, lost acks, restart with data, restart with data lost); %d deploys queued during faults, each applied once and acknowledged after recovery; running proxies' Deployments unchanged; Manager not restarted", len(results), deployments-1))
	for _, r := range results {
		if r.fault == "restart-data-lost" {
			figure(t, "Control Plane fault: restart with its data lost", "every heartbeat refused (401), reported in the Manager's status ConfigMap; nothing applied or touched; Manager running")
			continue
		}
		figure(t, "Control Plane fault: "+r.fault, fmt.Sprintf("%s requests faulted; the deploy queued during (for the restart: right after) it applied and acknowledged %s after the fault began; Control Plane-side heartbeat age up to %s", r.faulted, r.recovery, r.maxAge))
	}
}

func licenseSecret(ns, doc string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "license"}, Data: map[string][]byte{"license": []byte(doc)}}
}
