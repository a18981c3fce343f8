// Command bench measures the nexo-operator on the full local cluster (make bench):
//
//  1. N NexoProxies sharing one profile, license and three-step pipeline are created, then the
//     real operator binary starts; time until all are Ready at their current generation,
//     reconciles and mutating API calls per proxy (from the operator's own metrics), peak RSS.
//  2. The shared step is edited; time until every proxy carries the new graph revision, and
//     until every proxy is Ready on it (its rollout included).
//  3. The operator restarts over the converged proxies; its mutating calls are counted.
//  4. A raw-write baseline makes, with an unthrottled client, the writes the contract asks of the
//     operator: every proxy's children and a Progressing status; then, as each Deployment becomes
//     Available, a Ready status and the RolloutComplete Event. Convergence is compared with the
//     time until every Deployment is Available (the stricter end: the closing writes come after
//     it), and the operator's mutating calls with the baseline's (counted at its client). Then
//     a step edit's writes (the new revision's ConfigMaps, the Deployment's template, a
//     Progressing status and the RolloutStarted Event; when rolled out, a Ready status and the
//     RolloutComplete Event), until every Deployment has rolled out: the baseline of phase 2.
//  5. nexoctl status -A against kubectl get nexoproxies -A over the N proxies (best of three).
//  6. An upgrade: the operator of the last release (built from the source commit
//     releases/<version> names) takes over the converged proxies, then this build's replaces it;
//     time until this build has re-verified every proxy, and what it wrote: with unchanged
//     rendering, no proxy Deployment write and no pod-template change.
package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/catalog"
	"github.com/nexo-io/nexo-edge/contract/license"
	"github.com/nexo-io/nexo-edge/contract/scheme"
	"github.com/nexo-io/nexo-edge/contract/signature"
	"github.com/nexo-io/nexo-edge/controllers/eventpost"
	"github.com/nexo-io/nexo-edge/controllers/render"
	"github.com/nexo-io/nexo-edge/hack/releasebuild"
	"github.com/nexo-io/nexo-edge/test/framework/fleet"
	"github.com/nexo-io/nexo-edge/test/framework/testcluster"
	"github.com/nexo-io/nexo-edge/test/framework/testinstall"
)

const (
	benchNS    = "bench"
	smallNS    = "bench-small"
	baselineNS = "baseline"
	opNS       = "nexo-system"
)

var (
	n       = flag.Int("n", 1000, "number of NexoProxies")
	workers = flag.Int("workers", 16, "concurrent writers for setup and the baseline")
	opBin   = flag.String("operator", "bin/operator", "operator binary")
	pworker = flag.Int("proxy-workers", 8, "operator --proxy-workers")
	opGOGC  = flag.String("operator-gogc", "", "GOGC for the operator process only (empty: the operator's own default)")
	cpuOut  = flag.String("cpu-profile", "", "write the operator's CPU profile over phase 1's convergence (the first -cpu-seconds of it) to FILE")
	cpuSecs = flag.Int("cpu-seconds", 60, "length of the -cpu-profile")
	phases  = flag.String("phases", "0123456", "the phases to run (0: marginal cost, 1: convergence, 2: step edit, 3: restart, 4: raw baselines, 5: nexoctl status, 6: upgrade from the last release); 1 is always run")
	from    = flag.String("upgrade-from", "", "phase 6's release (a folder of releases/); empty: the newest release older than this build")
	heapOut = flag.String("heap-profile", "", "write the operator's heap profiles, idle (FILE.idle) and after convergence (FILE), sampled every 4 KiB")
)

func main() {
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type result struct {
	name, value, target string
}

// bench is one run: the cluster, a client, what the phases measured for the later ones to
// compare with, and the result table.
type bench struct {
	ctx     context.Context
	cl      *testcluster.Cluster
	c       client.WithWatch
	keyFile string
	results []result

	small int // phase 0's proxies: a tenth of N
	// Phase 1's convergence, and its and phase 2's mutating calls, for phase 4's comparisons.
	converge, stepEdit       time.Duration
	convergeCalls, editCalls float64
}

// run starts the full local cluster, then runs the phases in order and prints the table.
func run() error {
	ctx := context.Background()
	// The runs together keep 2.1N proxy pods (N, N/10 and the baseline's N) and up to N surge pods
	// during the step edit's rollout.
	nodes := make([]testcluster.Node, max(4, (31*(*n)/10)/testcluster.NodePods+1))
	for i := range nodes {
		nodes[i].Name = fmt.Sprintf("bench-%d", i)
	}
	fmt.Printf("starting the full local cluster (%d kwok nodes) for N=%d ...\n", len(nodes), *n)
	cl, err := testcluster.Start(ctx, testcluster.Options{Mode: testcluster.Full, CRDDirectoryPaths: []string{testcluster.CRDDir()}, Nodes: nodes})
	if err != nil {
		return err
	}
	defer cl.Stop()
	c, err := client.NewWithWatch(cl.Config, client.Options{Scheme: scheme.New()})
	if err != nil {
		return err
	}
	keyFile, err := setup(ctx, c, cl.Dir)
	if err != nil {
		return err
	}
	b := &bench{ctx: ctx, cl: cl, c: c, keyFile: keyFile, small: max(*n/10, 1)}
	idle, err := b.idleFootprint()
	if err != nil {
		return err
	}
	var sm footprint
	if runs('0') {
		if sm, err = marginal(ctx, c, cl, keyFile, b.small); err != nil {
			return err
		}
	}
	op, err := b.converge1(idle, sm)
	if err != nil {
		return err
	}
	if runs('2') {
		err = b.stepEdit2(op)
	}
	op.stop()
	if err != nil {
		return err
	}
	for _, phase := range []struct {
		id  byte
		run func() error
	}{{'3', b.restart3}, {'4', b.baselines4}, {'5', b.status5}, {'6', b.upgrade6}} {
		if runs(phase.id) {
			if err := phase.run(); err != nil {
				return err
			}
		}
	}
	b.print()
	return nil
}

// add records one measure and shows it at once.
func (b *bench) add(name, value, target string) {
	b.results = append(b.results, result{name, value, target})
	fmt.Printf("  %-44s %s\n", name, value)
}

// idleFootprint is the operator's memory with the shared graph but no proxies.
func (b *bench) idleFootprint() (footprint, error) {
	idle, err := startOperator(b.cl, b.keyFile)
	if err != nil {
		return footprint{}, err
	}
	defer idle.stop()
	heap := idle.sampleHeap()
	time.Sleep(5 * time.Second)
	f := footprint{rss: idle.rssKB("VmHWM"), heap: heap.end()}
	f.live, err = idle.liveHeapKB(profilePath(".idle"))
	return f, err
}

// converge1 is phase 1: N proxies are created, the operator starts and converges them. It
// returns the running operator, which phase 2 uses.
func (b *bench) converge1(idle, sm footprint) (*operatorProcess, error) {
	ctx, c := b.ctx, b.c
	fmt.Printf("creating %d NexoProxies ...\n", *n)
	if err := fleet.Parallel(*n, *workers, func(i int) error { return c.Create(ctx, fleet.Proxy(benchNS, i)) }); err != nil {
		return nil, err
	}
	fmt.Println("phase 1: operator converges all proxies")
	op, err := startOperator(b.cl, b.keyFile)
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*operatorProcess, error) { op.stop(); return nil, err }
	start := time.Now()
	heap := op.sampleHeap()
	cpuProfile := op.cpuProfile(*cpuOut, *cpuSecs)
	// The first pass: every proxy has a desired revision, so all its children are written.
	firstPass := make(chan time.Duration, 1)
	go func() {
		_ = waitProxies(ctx, c, waitLimit(), func(p *nexov1alpha1.NexoProxy) bool { return p.Status.GraphRevision != "" })
		firstPass <- time.Since(start)
	}()
	if err := waitProxies(ctx, c, waitLimit(), readyAtGeneration); err != nil {
		return fail(fmt.Errorf("%w; operator log tail:\n%s", err, op.logTail()))
	}
	b.converge = time.Since(start)
	if err := <-cpuProfile; err != nil {
		return fail(err)
	}
	time.Sleep(2 * time.Second) // the last Events leave the recorder's queue
	m, err := op.metrics()
	if err != nil {
		return fail(err)
	}
	peak := footprint{rss: op.rssKB("VmHWM"), heap: heap.end()}
	cpu := op.cpuSeconds()
	if peak.live, err = op.liveHeapKB(profilePath("")); err != nil {
		return fail(err)
	}
	b.convergeCalls = m.mutating
	perProxy := func(kb int64) string { return fmt.Sprintf("%.1f KB", float64(kb)/float64(*n)) }
	b.add("first pass (every proxy has a desired revision)", (<-firstPass).Round(10*time.Millisecond).String(), "")
	b.add("convergence time (all Ready)", b.converge.Round(10*time.Millisecond).String(), "")
	b.add("reconciles per proxy", fmt.Sprintf("%.2f", m.reconciles/float64(*n)), "≤ 2")
	b.add("mutating API calls per proxy", fmt.Sprintf("%.2f (conflicts %.2f, other failures %.2f)", m.mutating/float64(*n), m.conflicts/float64(*n), m.failed/float64(*n)), "")
	b.add("operator peak RSS", fmt.Sprintf("%.1f MiB (idle %.1f MiB)", mib(peak.rss), mib(idle.rss)), "")
	b.add("RSS per proxy (peak - idle) / N", perProxy(peak.rss-idle.rss), "")
	b.add("RSS per proxy (peak / N)", perProxy(peak.rss), "")
	b.add("operator CPU time (user + system)", fmt.Sprintf("%.1fs", cpu), "")
	b.add("Go heap in use, peak (idle)", fmt.Sprintf("%.1f MiB (%.1f MiB)", mib(peak.heap), mib(idle.heap)), "")
	b.add("Go heap per proxy (peak - idle) / N", perProxy(peak.heap-idle.heap), "")
	b.add("Go heap live after GC, converged (idle)", fmt.Sprintf("%.1f MiB (%.1f MiB)", mib(peak.live), mib(idle.live)), "")
	b.add("Go heap live per proxy (converged - idle) / N", perProxy(peak.live-idle.live), "")
	if runs('0') {
		added := float64(*n - b.small)
		b.add(fmt.Sprintf("operator peak RSS converging %d proxies", b.small), fmt.Sprintf("%.1f MiB", mib(sm.rss)), "")
		b.add(fmt.Sprintf("RSS per added proxy (peak %d - peak %d) / %d", *n, b.small, *n-b.small), fmt.Sprintf("%.1f KB", float64(peak.rss-sm.rss)/added), "≤ 10 KB")
		b.add("Go heap per added proxy, peak (live after GC)", fmt.Sprintf("%.1f KB (%.1f KB)", float64(peak.heap-sm.heap)/added, float64(peak.live-sm.live)/added), "")
	}
	return op, nil
}

func mib(kb int64) float64 { return float64(kb) / 1024 }

// stepEdit2 is phase 2: the shared step is edited under the running operator; time until every
// proxy carries the new revision, and until every proxy is Ready on it.
func (b *bench) stepEdit2(op *operatorProcess) error {
	ctx, c := b.ctx, b.c
	fmt.Println("phase 2: edit the shared step")
	p := &nexov1alpha1.NexoProxy{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: benchNS, Name: "proxy-0"}, p); err != nil {
		return err
	}
	old := p.Status.GraphRevision
	rl := &nexov1alpha1.NexoRateLimit{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: benchNS, Name: fleet.SharedStep}, rl); err != nil {
		return err
	}
	rl.Spec.OperationsPerSecond++
	if err := c.Update(ctx, rl); err != nil {
		return err
	}
	start := time.Now()
	if err := waitProxies(ctx, c, waitLimit(), func(p *nexov1alpha1.NexoProxy) bool {
		return p.Status.GraphRevision != old && p.Status.GraphRevision != ""
	}); err != nil {
		return err
	}
	b.add("shared step edit → all proxies on new revision", time.Since(start).Round(10*time.Millisecond).String(), "")
	if err := waitProxies(ctx, c, waitLimit(), func(p *nexov1alpha1.NexoProxy) bool {
		return p.Status.Phase == nexov1alpha1.ProxyReady && p.Status.AvailableRevision == p.Status.GraphRevision && p.Status.GraphRevision != old
	}); err != nil {
		return err
	}
	b.stepEdit = time.Since(start)
	b.add("shared step edit → all Ready on it (rollout)", b.stepEdit.Round(10*time.Millisecond).String(), "")
	time.Sleep(3 * time.Second)
	after, err := op.metrics()
	if err != nil {
		return err
	}
	b.editCalls = after.mutating - b.convergeCalls
	return nil
}

// restart3 is phase 3: the operator restarts over converged proxies; it should write nothing.
func (b *bench) restart3() error {
	fmt.Println("phase 3: restart the operator over converged proxies")
	op, err := startOperator(b.cl, b.keyFile)
	if err != nil {
		return err
	}
	defer op.stop()
	var m opMetrics
	deadline := time.Now().Add(waitLimit())
	for {
		m, err = op.metrics()
		if err == nil && m.reconciles >= float64(*n) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("restarted operator reconciled %.0f of %d proxies", m.reconciles, *n)
		}
		time.Sleep(500 * time.Millisecond)
	}
	time.Sleep(3 * time.Second)
	if m, err = op.metrics(); err != nil {
		return err
	}
	b.add("mutating API calls after restart", fmt.Sprintf("%.0f (over %.0f reconciles)", m.mutating, m.reconciles), "0")
	return nil
}

// upgrade6 is phase 6: the last release's operator over the converged proxies, then this
// build's. What this build writes to the proxies' Deployments is read from the Deployments
// themselves (generation and pod template), besides its own count of mutating calls.
func (b *bench) upgrade6() error {
	version, err := lastRelease(*from)
	if err != nil {
		return err
	}
	fmt.Printf("phase 6: upgrade from the %s operator (built from its release's source commit)\n", version)
	bins, err := releasebuild.Build(testcluster.RepoRoot(), version, b.cl.Dir, "operator")
	if err != nil {
		return err
	}
	waitAll := func(op *operatorProcess) (opMetrics, error) {
		deadline := time.Now().Add(waitLimit())
		for {
			m, err := op.metrics()
			if err == nil && m.reconciles >= float64(*n) {
				return m, nil
			}
			if time.Now().After(deadline) {
				return m, fmt.Errorf("the operator reconciled %.0f of %d proxies; log:\n%s", m.reconciles, *n, op.logTail())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	old, err := startOperatorBin(b.cl, b.keyFile, benchNS, bins["operator"])
	if err != nil {
		return err
	}
	_, err = waitAll(old)
	if err == nil {
		// The release's operator has taken over when it is quiet: with another rendering than
		// this build's it rolls the proxies to its own first (a reconcile and writes each).
		err = quiet(old, waitLimit())
	}
	old.stop()
	if err != nil {
		return err
	}
	before, err := b.deployments()
	if err != nil {
		return err
	}
	// A build that renders another runtime contract than the release gives every proxy one
	// rollout (docs/upgrade.md); otherwise the upgrade writes nothing.
	running, err := testinstall.RuntimeContract(b.ctx, b.c, benchNS, "proxy-0")
	if err != nil {
		return err
	}
	wantWrites, wantCalls := "0 / 0", "0"
	if running != render.ContractVersion {
		wantWrites = fmt.Sprintf("%d / %d (runtime contract %q → %q)", len(before), len(before), running, render.ContractVersion)
		wantCalls = "a rollout's a proxy (its new config, Deployment, status)"
	}
	start := time.Now()
	op, err := startOperator(b.cl, b.keyFile)
	if err != nil {
		return err
	}
	defer op.stop()
	if _, err := waitAll(op); err != nil {
		return err
	}
	reverified := time.Since(start)
	// A rollout of every proxy goes on after each was reconciled once: count when it is done.
	if err := quiet(op, waitLimit()); err != nil {
		return err
	}
	settled := time.Since(start)
	m, err := op.metrics()
	if err != nil {
		return err
	}
	after, err := b.deployments()
	if err != nil {
		return err
	}
	writes, rolls := 0, 0
	for name, d := range before {
		if after[name].generation != d.generation {
			writes++
		}
		if after[name].template != d.template {
			rolls++
		}
	}
	b.add(fmt.Sprintf("upgrade %s → %s: every proxy re-verified", version, catalog.BuildVersion), reverified.Round(10*time.Millisecond).String(), "")
	b.add("upgrade: the operator quiet again (3 s without a call)", settled.Round(10*time.Millisecond).String(), "")
	b.add("upgrade: proxy Deployment writes / pod-template changes", fmt.Sprintf("%d / %d (of %d)", writes, rolls, len(before)), wantWrites)
	b.add("upgrade: mutating API calls", fmt.Sprintf("%.0f (over %.0f reconciles)", m.mutating, m.reconciles), wantCalls)
	return nil
}

// quiet waits until op has made no reconcile and no mutating call for 3 s, or fails after limit.
func quiet(op *operatorProcess, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	last, err := op.metrics()
	for err == nil {
		time.Sleep(3 * time.Second)
		var m opMetrics
		if m, err = op.metrics(); err != nil {
			break
		}
		if m.reconciles == last.reconciles && m.mutating == last.mutating {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the operator was still busy after %s (%.0f reconciles, %.0f mutating calls)", limit, m.reconciles, m.mutating)
		}
		last = m
	}
	return err
}

// deploymentState is what phase 6 compares: a Deployment's generation (any spec write moves it)
// and a hash of its pod template (a change rolls its pods).
type deploymentState struct {
	generation int64
	template   string
}

func (b *bench) deployments() (map[string]deploymentState, error) {
	list := &appsv1.DeploymentList{}
	if err := b.c.List(b.ctx, list, client.InNamespace(benchNS)); err != nil {
		return nil, err
	}
	out := map[string]deploymentState{}
	for _, d := range list.Items {
		raw, err := json.Marshal(d.Spec.Template)
		if err != nil {
			return nil, err
		}
		out[d.Name] = deploymentState{generation: d.Generation, template: fmt.Sprintf("%x", sha256.Sum256(raw))}
	}
	return out, nil
}

// lastRelease is version, or the newest release older than this build.
func lastRelease(version string) (string, error) {
	if version != "" {
		return version, nil
	}
	prev, err := releasebuild.Previous(testcluster.RepoRoot(), catalog.BuildVersion)
	if err == nil && prev == "" {
		err = fmt.Errorf("no release older than %s under releases/ to upgrade from", catalog.BuildVersion)
	}
	return prev, err
}

// baselines4 is phase 4: the raw-write baselines of phases 1 and 2, and the comparisons.
func (b *bench) baselines4() error {
	ctx, c := b.ctx, b.c
	fmt.Println("phase 4: raw-write baseline (the contract's writes, unthrottled client)")
	if err := fleet.Parallel(*n, *workers, func(i int) error { return c.Create(ctx, fleet.Proxy(baselineNS, i)) }); err != nil {
		return err
	}
	base, err := rawBaseline(ctx, c)
	if err != nil {
		return err
	}
	b.add("baseline: children written, all Available", base.children.Round(10*time.Millisecond).String(), "")
	b.add("baseline: closing status and Event written too", base.contract.Round(10*time.Millisecond).String(), "")
	b.add("convergence / baseline (all Available)", fmt.Sprintf("%.2fx", b.converge.Seconds()/base.children.Seconds()), "≤ 1.2x")
	b.add("baseline mutating calls per proxy", fmt.Sprintf("%.2f", float64(base.calls)/float64(*n)), "")
	b.add("operator / baseline mutating calls", fmt.Sprintf("%.2f / %.2f", b.convergeCalls/float64(*n), float64(base.calls)/float64(*n)), "≤ 1")
	if !runs('2') {
		return nil
	}
	edit, err := rawStepEdit(ctx, c)
	if err != nil {
		return err
	}
	b.add("step edit baseline: rolled out", edit.children.Round(10*time.Millisecond).String(), "")
	b.add("step edit baseline: closing writes too", edit.contract.Round(10*time.Millisecond).String(), "")
	b.add("step edit / its baseline (rolled out)", fmt.Sprintf("%.2fx", b.stepEdit.Seconds()/edit.children.Seconds()), "≤ 1.3x")
	b.add("step edit mutating calls per proxy: operator / baseline", fmt.Sprintf("%.2f / %.2f", b.editCalls/float64(*n), float64(edit.calls)/float64(*n)), "")
	return nil
}

// status5 is phase 5: nexoctl status -A against kubectl get nexoproxies -A, best of three.
func (b *bench) status5() error {
	fmt.Println("phase 5: nexoctl status -A against kubectl get nexoproxies -A")
	status, err := bestOf3(b.cl.Kubeconfig, filepath.Join(testcluster.BinDir(), "nexoctl"), "status", "-A")
	if err != nil {
		return err
	}
	kubectl, err := bestOf3(b.cl.Kubeconfig, filepath.Join(testcluster.BinDir(), "kubectl"), "get", "nexoproxies", "-A")
	if err != nil {
		return err
	}
	listed := *n
	if runs('0') {
		listed += b.small
	}
	if runs('4') {
		listed += *n
	}
	b.add(fmt.Sprintf("nexoctl status -A (%d proxies)", listed), status.Round(time.Millisecond).String(), "")
	b.add("kubectl get nexoproxies -A", kubectl.Round(time.Millisecond).String(), "")
	b.add("nexoctl status -A / kubectl get", fmt.Sprintf("%.2fx", status.Seconds()/kubectl.Seconds()), "≤ 1.2x")
	return nil
}

// print writes the result table.
func (b *bench) print() {
	gogc := *opGOGC
	if gogc == "" {
		gogc = "default (--gc-percent)"
	}
	fmt.Printf("\nNexo operator benchmark, N=%d, proxy workers %d, operator GOGC %s\n", *n, *pworker, gogc)
	fmt.Printf("%-56s %-34s %s\n", "measure", "value", "target")
	for _, r := range b.results {
		fmt.Printf("%-56s %-34s %s\n", r.name, r.value, r.target)
	}
}

// footprint is the operator's memory after converging some proxies: peak RSS, peak Go heap in
// use and the live heap after a collection, in KiB.
type footprint struct{ rss, heap, live int64 }

// marginal measures phase 0: the same convergence for a tenth as many proxies, in a namespace
// the later runs do not watch. Both peaks carry the operator's fixed costs under load (the
// garbage collector's headroom over the idle heap, buffers), so their difference is what the
// additional proxies cost.
func marginal(ctx context.Context, c client.WithWatch, cl *testcluster.Cluster, keyFile string, small int) (footprint, error) {
	fmt.Printf("phase 0: the operator converges %d proxies (for the marginal cost) ...\n", small)
	if err := fleet.Parallel(small, *workers, func(i int) error { return c.Create(ctx, fleet.Proxy(smallNS, i)) }); err != nil {
		return footprint{}, err
	}
	sm, err := startOperatorIn(cl, keyFile, smallNS)
	if err != nil {
		return footprint{}, err
	}
	heap := sm.sampleHeap()
	if err := fleet.Wait(ctx, c, smallNS, small, waitLimit(), readyAtGeneration); err != nil {
		sm.stop()
		return footprint{}, fmt.Errorf("%w; operator log tail:\n%s", err, sm.logTail())
	}
	f := footprint{rss: sm.rssKB("VmHWM"), heap: heap.end()}
	f.live, err = sm.liveHeapKB("")
	sm.stop()
	return f, err
}

// setup creates the namespaces, the trusted-keys and pull Secrets, and the shared graph.
func setup(ctx context.Context, c client.Client, dir string) (string, error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return "", err
	}
	keyFile := filepath.Join(dir, "license.pem")
	if err := os.WriteFile(keyFile, signature.MarshalPublicKey(pub), 0o600); err != nil {
		return "", err
	}
	doc, err := license.Issue(license.Claims{Licensee: "Bench", ExpiresAt: time.Now().Add(24 * time.Hour),
		Entitlements: fleet.Entitlements, MaxProxies: int32(*n)}, priv)
	if err != nil {
		return "", err
	}
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: opNS}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: benchNS}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: smallNS}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: baselineNS}},
		fleet.RegistrySecret(opNS),
	}
	objs = append(objs, fleet.Graph(benchNS, doc)...)
	objs = append(objs, fleet.Graph(smallNS, doc)...)
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			return "", fmt.Errorf("create %T %s: %w", o, o.GetName(), err)
		}
	}
	return keyFile, nil
}

// baselineRun is what a raw baseline measured: when every Deployment was Available (or rolled
// out) after the children's writes, when the contract's closing writes were done too, and the
// mutating calls it made.
type baselineRun struct {
	children, contract time.Duration
	calls              int64
}

// rawBaseline makes, with an unthrottled client, the writes the contract asks of the operator for
// every baseline proxy. First its children (ConfigMaps, pull Secret copy, Deployment, Service) and
// a Progressing status naming the desired revision; then, as each Deployment becomes Available,
// the closing writes: a Ready status naming the available revision, and the RolloutComplete
// Event.
func rawBaseline(ctx context.Context, c client.WithWatch) (baselineRun, error) {
	pull := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: opNS, Name: "nexo-registry"}, pull); err != nil {
		return baselineRun{}, err
	}
	var calls atomic.Int64
	w := countMutating(c, &calls)
	events := eventpost.New(w, w.Scheme(), "nexo.io/bench-baseline")
	proxies := make([]*nexov1alpha1.NexoProxy, *n)
	start := time.Now()
	err := fleet.Parallel(*n, *workers, func(i int) error {
		p := fleet.Proxy(baselineNS, i)
		if err := w.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
			return err
		}
		g := baselineGraph(p)
		objs := []client.Object{}
		for _, cm := range render.ConfigMaps(g, "rev") {
			objs = append(objs, cm)
		}
		objs = append(objs, render.PullSecret(g, pull), render.Deployment(g, "hash", "rev"), render.Service(g))
		for _, o := range objs {
			if err := w.Create(ctx, o); err != nil {
				return err
			}
		}
		proxies[i] = p
		return setStatus(ctx, w, p, "rev", "", nexov1alpha1.ProxyProgressing, nexov1alpha1.ReasonProgressing)
	})
	if err != nil {
		return baselineRun{}, err
	}
	return finishBaseline(ctx, w, start, proxies, &calls, "Available", func(d *appsv1.Deployment) bool {
		return d.Status.AvailableReplicas == 1 && d.Status.ObservedGeneration >= d.Generation
	}, closeRollout(ctx, w, events, "rev"))
}

// rawStepEdit makes, for every baseline proxy, the writes the contract asks for a step edit: the
// new revision's two ConfigMaps, the Deployment's pod template (new config, new hash), a
// Progressing status naming the new revision and the RolloutStarted Event; then, as each
// Deployment has rolled out (observed, updated, available, no surge pod left), a Ready status
// and the RolloutComplete Event.
func rawStepEdit(ctx context.Context, c client.WithWatch) (baselineRun, error) {
	var calls atomic.Int64
	w := countMutating(c, &calls)
	events := eventpost.New(w, w.Scheme(), "nexo.io/bench-baseline")
	proxies := make([]*nexov1alpha1.NexoProxy, *n)
	start := time.Now()
	err := fleet.Parallel(*n, *workers, func(i int) error {
		p := fleet.Proxy(baselineNS, i)
		if err := w.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
			return err
		}
		g := baselineGraph(p)
		for _, cm := range render.ConfigMaps(g, "rev2") {
			if err := w.Create(ctx, cm); err != nil {
				return err
			}
		}
		want := render.Deployment(g, "hash2", "rev2")
		dep := &appsv1.Deployment{}
		if err := w.Get(ctx, client.ObjectKeyFromObject(want), dep); err != nil {
			return err
		}
		dep.Spec.Template = want.Spec.Template
		if err := w.Update(ctx, dep); err != nil {
			return err
		}
		proxies[i] = p
		if err := setStatus(ctx, w, p, "rev2", "rev", nexov1alpha1.ProxyProgressing, nexov1alpha1.ReasonProgressing); err != nil {
			return err
		}
		return events.Post(ctx, p, nil, corev1.EventTypeNormal, nexov1alpha1.EventRolloutStarted, "Rollout", "rolling out graph revision rev2 (from rev)")
	})
	if err != nil {
		return baselineRun{}, err
	}
	return finishBaseline(ctx, w, start, proxies, &calls, "rolled out", func(d *appsv1.Deployment) bool {
		s := d.Status
		return s.ObservedGeneration >= d.Generation && s.UpdatedReplicas == 1 && s.AvailableReplicas == 1 && s.Replicas == 1
	}, closeRollout(ctx, w, events, "rev2"))
}

// finishBaseline follows the baseline Deployments (a proxy's Deployment has its name) and runs
// closing for a proxy, on one of the workers, as soon as its Deployment is done. It returns when
// every Deployment was done (children) and when every closing had returned (contract).
func finishBaseline(ctx context.Context, c client.WithWatch, start time.Time, proxies []*nexov1alpha1.NexoProxy, calls *atomic.Int64,
	what string, done func(*appsv1.Deployment) bool, closing func(*nexov1alpha1.NexoProxy) error) (baselineRun, error) {
	byName := make(map[string]*nexov1alpha1.NexoProxy, len(proxies))
	for _, p := range proxies {
		byName[p.Name] = p
	}
	queue := make(chan *nexov1alpha1.NexoProxy, len(proxies))
	errs := make(chan error, *workers)
	var wg sync.WaitGroup
	for range *workers {
		wg.Go(func() {
			for p := range queue {
				if err := closing(p); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	queued := map[string]bool{}
	err := fleet.WaitFor(ctx, c, &appsv1.DeploymentList{}, baselineNS, *n, waitLimit(), func(o client.Object) bool {
		ok := done(o.(*appsv1.Deployment))
		if p := byName[o.GetName()]; ok && p != nil && !queued[p.Name] {
			queued[p.Name] = true
			queue <- p
		}
		return ok
	})
	children := time.Since(start)
	close(queue)
	wg.Wait()
	close(errs)
	if err != nil {
		return baselineRun{}, fmt.Errorf("baseline: Deployments %s: %w", what, err)
	}
	if err := <-errs; err != nil {
		return baselineRun{}, fmt.Errorf("baseline: closing writes: %w", err)
	}
	return baselineRun{children: children, contract: time.Since(start), calls: calls.Load()}, nil
}

// setStatus writes a baseline proxy's status as the operator would: phase, the desired and
// available revisions and the Ready condition.
func setStatus(ctx context.Context, c client.Client, p *nexov1alpha1.NexoProxy, desired, available string, phase nexov1alpha1.ProxyPhase, reason string) error {
	p.Status.ObservedGeneration = p.Generation
	p.Status.Phase = phase
	p.Status.GraphRevision = desired
	p.Status.AvailableRevision = available
	ready := metav1.ConditionFalse
	if phase == nexov1alpha1.ProxyReady {
		ready = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&p.Status.Conditions, metav1.Condition{Type: nexov1alpha1.ConditionReady, Status: ready, Reason: reason,
		Message: "revision " + desired, ObservedGeneration: p.Generation})
	return c.Status().Update(ctx, p)
}

// closeRollout is a baseline's closing writes for a proxy whose Deployment runs rev: a Ready
// status naming rev as available, then the RolloutComplete Event.
func closeRollout(ctx context.Context, c client.Client, events *eventpost.Recorder, rev string) func(*nexov1alpha1.NexoProxy) error {
	return func(p *nexov1alpha1.NexoProxy) error {
		if err := setStatus(ctx, c, p, rev, rev, nexov1alpha1.ProxyReady, nexov1alpha1.ReasonAvailable); err != nil {
			return err
		}
		return events.Post(ctx, p, nil, corev1.EventTypeNormal, nexov1alpha1.EventRolloutComplete, "Rollout", "every replica runs graph revision %s", rev)
	}
}

// countMutating counts the mutating calls (create, update, patch, delete, status writes) made
// through c.
func countMutating(c client.WithWatch, calls *atomic.Int64) client.WithWatch {
	return interceptor.NewClient(c, interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.CreateOption) error {
			calls.Add(1)
			return c.Create(ctx, o, opts...)
		},
		Update: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.UpdateOption) error {
			calls.Add(1)
			return c.Update(ctx, o, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, o client.Object, patch client.Patch, opts ...client.PatchOption) error {
			calls.Add(1)
			return c.Patch(ctx, o, patch, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, o client.Object, opts ...client.DeleteOption) error {
			calls.Add(1)
			return c.Delete(ctx, o, opts...)
		},
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, o client.Object, opts ...client.SubResourceUpdateOption) error {
			calls.Add(1)
			return c.SubResource(sub).Update(ctx, o, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, o client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			calls.Add(1)
			return c.SubResource(sub).Patch(ctx, o, patch, opts...)
		},
	})
}

// baselineGraph is the graph the operator renders for a fleet proxy, for the raw baselines.
func baselineGraph(p *nexov1alpha1.NexoProxy) *render.Graph {
	return &render.Graph{Proxy: p, Pipeline: &nexov1alpha1.NexoPipeline{}, Profile: fleet.Profile(baselineNS), OperatorNamespace: opNS,
		Steps: []render.Component{{Kind: "NexoPIIMasking", Name: "mask", Slot: catalog.SlotResponse}}}
}

// bestOf3 runs a CLI three times against the cluster and returns its shortest wall time.
func bestOf3(kubeconfig, bin string, args ...string) (time.Duration, error) {
	best := time.Duration(0)
	for range 3 {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig, "NO_COLOR=1")
		start := time.Now()
		out, err := cmd.CombinedOutput()
		took := time.Since(start)
		// nexoctl status exits 1 when something is not ready (here: no operator Deployment);
		// the listing is what is timed.
		if ee, ok := err.(*exec.ExitError); err != nil && !(ok && ee.ExitCode() == 1) {
			return 0, fmt.Errorf("%s %v: %w\n%s", bin, args, err, lastLines(string(out), 10))
		}
		if best == 0 || took < best {
			best = took
		}
	}
	return best, nil
}

// readyAtGeneration is a proxy Ready for its current spec: what convergence waits for.
func readyAtGeneration(p *nexov1alpha1.NexoProxy) bool {
	return p.Status.Phase == nexov1alpha1.ProxyReady && p.Status.ObservedGeneration == p.Generation
}

// waitLimit bounds every wait: 15 minutes plus 250 ms a proxy, so N=5000 gets 36 minutes.
func waitLimit() time.Duration { return 15*time.Minute + time.Duration(*n)*250*time.Millisecond }

// runs tells whether a phase was asked for.
func runs(phase byte) bool { return strings.IndexByte(*phases, phase) >= 0 }

func waitProxies(ctx context.Context, c client.WithWatch, timeout time.Duration, ok func(*nexov1alpha1.NexoProxy) bool) error {
	return fleet.Wait(ctx, c, benchNS, *n, timeout, ok)
}

// operatorProcess is the real operator binary running against the cluster.
type operatorProcess struct {
	cmd         *exec.Cmd
	metricsAddr string
	pprofAddr   string
	logPath     string
}

func startOperator(cl *testcluster.Cluster, keyFile string) (*operatorProcess, error) {
	return startOperatorIn(cl, keyFile, benchNS)
}

func startOperatorIn(cl *testcluster.Cluster, keyFile, ns string) (*operatorProcess, error) {
	return startOperatorBin(cl, keyFile, ns, *opBin)
}

// startOperatorBin starts the operator binary bin watching ns.
func startOperatorBin(cl *testcluster.Cluster, keyFile, ns, bin string) (*operatorProcess, error) {
	mp, err := testcluster.FreePort()
	if err != nil {
		return nil, err
	}
	hp, err := testcluster.FreePort()
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(cl.Dir, fmt.Sprintf("operator-%d.log", time.Now().UnixNano()))
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	pp, err := testcluster.FreePort()
	if err != nil {
		return nil, err
	}
	o := &operatorProcess{metricsAddr: fmt.Sprintf("127.0.0.1:%d", mp), pprofAddr: fmt.Sprintf("127.0.0.1:%d", pp), logPath: logPath}
	// Plain-HTTP metrics: the benchmark scrapes them from loopback.
	o.cmd = exec.Command(bin, "--metrics-bind-address="+o.metricsAddr, "--metrics-secure=false", fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", hp),
		"--pprof-bind-address="+o.pprofAddr, "--watch-namespaces="+ns, "--operator-namespace="+opNS, "--license-public-key="+keyFile,
		fmt.Sprintf("--proxy-workers=%d", *pworker), "--kube-api-qps=2000", "--kube-api-burst=4000", "--zap-log-level=error")
	o.cmd.Env = append(os.Environ(), "KUBECONFIG="+cl.Kubeconfig)
	if *opGOGC != "" {
		o.cmd.Env = append(o.cmd.Env, "GOGC="+*opGOGC)
	}
	if *heapOut != "" {
		o.cmd.Env = append(o.cmd.Env, "GODEBUG=memprofilerate=4096")
	}
	o.cmd.Stdout, o.cmd.Stderr = f, f
	o.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := o.cmd.Start(); err != nil {
		return nil, err
	}
	for i := 0; i < 100; i++ {
		if resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", hp)); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return o, nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	o.stop()
	return nil, fmt.Errorf("operator not ready; log:\n%s", o.logTail())
}

func (o *operatorProcess) stop() {
	_ = o.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = o.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = o.cmd.Process.Kill()
		<-done
	}
}

func (o *operatorProcess) logTail() string { return testcluster.Tail(o.logPath, 20) }

// rssKB reads a memory field (VmRSS, VmHWM) of the operator process in KiB.
func (o *operatorProcess) rssKB(field string) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", o.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, field+":") {
			v, _ := strconv.ParseInt(strings.Fields(line)[1], 10, 64)
			return v
		}
	}
	return 0
}

// profilePath is where a heap profile goes (-heap-profile plus suffix), or "" for none.
func profilePath(suffix string) string {
	if *heapOut == "" {
		return ""
	}
	return *heapOut + suffix
}

// liveHeapKB forces a garbage collection in the operator (the heap profile endpoint with gc=1
// runs one), then reads the heap still allocated: the live heap, without the collector's
// headroom. The profile is written to path unless path is empty.
func (o *operatorProcess) liveHeapKB(path string) (int64, error) {
	resp, err := http.Get("http://" + o.pprofAddr + "/debug/pprof/heap?gc=1")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	out := io.Discard
	if path != "" {
		f, err := os.Create(path)
		if err != nil {
			return 0, err
		}
		defer f.Close()
		out = f
	}
	if _, err := io.Copy(out, resp.Body); err != nil {
		return 0, err
	}
	m, err := o.metrics()
	if err != nil {
		return 0, err
	}
	return int64(m.heapAlloc / 1024), nil
}

// cpuSeconds is the operator's user + system CPU time so far (/proc/PID/stat, clock ticks of
// 1/100 s, as on every Linux this runs on).
func (o *operatorProcess) cpuSeconds() float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", o.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	// Fields after the parenthesised command name; utime and stime are the 14th and 15th fields.
	rest := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	if len(rest) < 13 {
		return 0
	}
	u, _ := strconv.ParseFloat(rest[11], 64)
	st, _ := strconv.ParseFloat(rest[12], 64)
	return (u + st) / 100
}

type opMetrics struct{ reconciles, mutating, conflicts, failed, heapInuse, heapAlloc float64 }

// heapSampler records the operator's peak Go heap in use (from its metrics) while it runs, to
// tell the live heap apart from what the garbage collector's headroom adds to the RSS. Once a
// second: each scrape allocates in the operator, which is what is being measured.
type heapSampler struct {
	peak float64
	stop chan struct{}
	done chan struct{}
}

func (o *operatorProcess) sampleHeap() *heapSampler {
	h := &heapSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(h.done)
		for {
			if m, err := o.metrics(); err == nil {
				h.peak = max(h.peak, m.heapInuse)
			}
			select {
			case <-h.stop:
				return
			case <-time.After(time.Second):
			}
		}
	}()
	return h
}

// cpuProfile writes the operator's CPU profile over the next seconds to path (nothing when path
// is empty); the channel gets the outcome.
func (o *operatorProcess) cpuProfile(path string, seconds int) <-chan error {
	out := make(chan error, 1)
	if path == "" {
		out <- nil
		return out
	}
	go func() {
		resp, err := http.Get(fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", o.pprofAddr, seconds))
		if err != nil {
			out <- err
			return
		}
		defer resp.Body.Close()
		f, err := os.Create(path)
		if err != nil {
			out <- err
			return
		}
		_, err = io.Copy(f, resp.Body)
		out <- errors.Join(err, f.Close())
	}()
	return out
}

// end stops sampling and returns the peak heap in use in KiB.
func (h *heapSampler) end() int64 {
	close(h.stop)
	<-h.done
	return int64(h.peak / 1024)
}

// metrics scrapes the operator: NexoProxy reconciles and mutating client requests.
func (o *operatorProcess) metrics() (opMetrics, error) {
	// Uncompressed: a gzip writer per scrape would add to the very heap being measured.
	req, err := http.NewRequest(http.MethodGet, "http://"+o.metricsAddr+"/metrics", nil)
	if err != nil {
		return opMetrics{}, err
	}
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return opMetrics{}, err
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return opMetrics{}, err
	}
	var m opMetrics
	for _, mf := range families["go_memstats_heap_inuse_bytes"].GetMetric() {
		m.heapInuse = mf.GetGauge().GetValue()
	}
	for _, mf := range families["go_memstats_heap_alloc_bytes"].GetMetric() {
		m.heapAlloc = mf.GetGauge().GetValue()
	}
	for _, mf := range families["controller_runtime_reconcile_total"].GetMetric() {
		for _, l := range mf.GetLabel() {
			if l.GetName() == "controller" && l.GetValue() == "nexoproxies" {
				m.reconciles += mf.GetCounter().GetValue()
			}
		}
	}
	for _, mf := range families["rest_client_requests_total"].GetMetric() {
		mutating, code := false, ""
		for _, l := range mf.GetLabel() {
			switch l.GetName() {
			case "method":
				mutating = l.GetValue() == "POST" || l.GetValue() == "PUT" || l.GetValue() == "PATCH" || l.GetValue() == "DELETE"
			case "code":
				code = l.GetValue()
			}
		}
		if mutating {
			v := mf.GetCounter().GetValue()
			m.mutating += v
			if code == "409" {
				m.conflicts += v
			} else if !strings.HasPrefix(code, "2") {
				m.failed += v
			}
		}
	}
	return m, nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
