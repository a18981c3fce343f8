package reliability_test

import (
	"context"
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/test/framework/testcluster"
	"github.com/nexo-io/nexo-edge/test/framework/testinstall"
)

// TestCrashInjection: N proxies converge twice on one cluster, once without faults ("clean") and
// once while the operator is killed with SIGKILL at seeded random moments ("crash"): during the
// first convergence and during a shared step's rollout, so kills land between a child's write
// and the status write that records it. After the last restart the crash namespace must end
// exactly as the clean one did: the same children with the same content and generations, the
// same revisions, ReplicaSets and pods, nothing orphaned or outside the watched namespaces,
// every proxy Ready; and the clean namespace, converged before, is left as it was.
func TestCrashInjection(t *testing.T) {
	n, k := *proxies, max(*kills, 10)
	s := *seed
	if s == 0 {
		s = time.Now().UnixNano()
	}
	t.Logf("seed %d (go test ./test/reliability -run CrashInjection -args -seed=%d reproduces the schedule)", s, s)
	rng := rand.New(rand.NewSource(s))
	timeout := time.Duration(5+n/50) * time.Minute

	// One license document for both namespaces: it counts proxies across every NexoLicense holding it.
	p := install(t, []string{"clean", "crash"}, 2*n, testcluster.Options{})
	var op *testinstall.LocalPod

	// The clean run.
	p.createFleet(t, "clean", n)
	op = p.startOperator(t)
	p.settle(t, "clean", n, "", timeout)
	first := revisionOf(t, p, "clean")
	p.editSharedStep(t, "clean")
	p.settle(t, "clean", n, first, timeout)
	op.Stop()
	clean := p.snapshot(t, "clean")

	// The crash run: the same fleet, and kills at seeded moments in both phases.
	var schedule []string
	var lastKill time.Time
	killSome := func(count int, phase string) {
		for i := 0; i < count; i++ {
			// 0.3 s to 2.5 s after the restarted operator became ready: it resyncs its caches
			// and is mid-pass over the fleet.
			delay := time.Duration(300+rng.Intn(2200)) * time.Millisecond
			time.Sleep(delay)
			done := p.converged("crash")
			op.Kill()
			lastKill = time.Now()
			schedule = append(schedule, fmt.Sprintf("%s +%s (%d/%d converged)", phase, delay.Round(10*time.Millisecond), done, n))
			op = p.startOperator(t)
		}
	}
	p.createFleet(t, "crash", n)
	op = p.startOperator(t)
	killSome(k-k*4/10, "converge")
	p.settle(t, "crash", n, "", timeout)
	if got := revisionOf(t, p, "crash"); got != first {
		t.Fatalf("crash run converged on revision %s, the clean run on %s", got, first)
	}
	p.editSharedStep(t, "crash")
	killSome(k*4/10, "rollout")
	p.settle(t, "crash", n, first, timeout)
	recovery := time.Since(lastKill)
	t.Logf("kills:\n  %s", strings.Join(schedule, "\n  "))

	crash := p.snapshot(t, "crash")
	if d := diff(clean, crash, 20); len(d) > 0 {
		t.Errorf("after %d kills the end state differs from the clean run's in %d places:\n%s", k, len(d), strings.Join(d, "\n"))
	}
	for key, v := range crash {
		if strings.Contains(v, "ORPHAN") || strings.HasPrefix(key, "ReplicaSets/ORPHAN") {
			t.Errorf("orphan: %s %s", key, v)
		}
		if strings.HasPrefix(key, "Pods/") && v != "1" {
			t.Errorf("%s: %s pods, want 1", key, v)
		}
	}
	if f := p.foreign(t, "clean", "crash"); len(f) > 0 {
		t.Errorf("objects with the operator's labels outside the watched namespaces: %v", f)
	}
	if d := diff(clean, p.snapshot(t, "clean"), 5); len(d) > 0 {
		t.Errorf("the converged clean namespace changed during the crash run:\n%s", strings.Join(d, "\n"))
	}
	midPass := 0
	for _, e := range schedule {
		if !strings.Contains(e, fmt.Sprintf("(%d/%d", n, n)) {
			midPass++
		}
	}
	figure(t, "operator kill -9 at seeded moments", fmt.Sprintf("%d (%d during the first convergence, %d during a shared step's rollout; %d with the namespace not yet converged; seed %d)", k, k-k*4/10, k*4/10, midPass, s))
	figure(t, "end state compared with a clean run", fmt.Sprintf("%d proxies, %d objects: %d differences", n, len(crash), len(diff(clean, crash, 1<<30))))
	figure(t, "all proxies converged, after the last kill", recovery.Round(100*time.Millisecond).String())
}

func revisionOf(t *testing.T, p *product, ns string) string {
	t.Helper()
	x := &nexov1alpha1.NexoProxy{}
	must(t, p.admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "proxy-0"}, x))
	return x.Status.GraphRevision
}
