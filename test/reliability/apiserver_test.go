package reliability_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/contract/protocol"
	"github.com/nexo-io/nexo-edge/test/framework/testcluster"
)

// TestAPIServerRestart: kube-apiserver stops and starts again (same port, same etcd data) while
// the operator converges a fleet whose shared step was edited just before, and while the
// Control Plane queues a deploy. The operator and the Manager (both with leader election, as
// installed) recover without a restart of their own, and nothing accepted is lost: every proxy
// ends on the edited revision, the deploy is applied and acknowledged, heartbeats resume.
func TestAPIServerRestart(t *testing.T) {
	ctx := context.Background()
	n := 100
	cp := startControlPlane(t)
	p, env := hosted(t, cp, cp.url(), []string{"shop"}, n+1, testcluster.Options{})
	mgr := p.startManager(t)
	op := p.startOperator(t, "--leader-elect=true")
	opPid, mgrPid := op.Pid(), mgr.Pid()

	p.createFleet(t, "shop", n)
	if err := waitUntil(5*time.Minute, func() bool { return p.converged("shop") >= 10 }); err != nil {
		t.Fatal("no proxy converged before the restart")
	}
	before := revisionOf(t, p, "shop")
	p.editSharedStep(t, "shop") // accepted just before the API server goes away
	converged := p.converged("shop")

	restarted := make(chan error, 1)
	go func() { restarted <- p.cluster.RestartAPIServer(ctx, 3*time.Second) }()
	if err := waitUntil(time.Minute, func() bool {
		return p.admin.Get(ctx, clientKey("default", "kubernetes"), &corev1.Service{}) != nil
	}); err != nil {
		t.Fatal("the API server never went down")
	}
	downAt := time.Now()
	cmd := cp.deploy(t, env, "shop", "hosted-proxy") // queued while the cluster is unreachable
	if err := <-restarted; err != nil {
		t.Fatal(err)
	}
	outage := time.Since(downAt)
	back := time.Now()

	p.settle(t, "shop", n+1, before, 5*time.Minute)
	recovery := time.Since(back)
	var list nexov1alpha1.NexoProxyList
	must(t, p.admin.List(ctx, &list))
	revisions := map[string]int{}
	for _, x := range list.Items {
		if x.Name != "hosted-proxy" {
			revisions[x.Status.GraphRevision]++
		}
	}
	if len(revisions) != 1 {
		t.Errorf("the fleet ended on several revisions: %v", revisions)
	}
	if err := waitUntil(time.Minute, func() bool {
		for _, c := range cp.view(t, env).Commands {
			if c.ID == cmd {
				return c.Status == protocol.Applied
			}
		}
		return false
	}); err != nil {
		t.Errorf("the deploy queued during the outage was not applied and acknowledged: %+v", cp.view(t, env).Commands)
	}
	if err := waitUntil(time.Minute, func() bool {
		v := cp.view(t, env)
		return v.LastHeartbeat != nil && v.LastHeartbeat.After(back) && v.State == "healthy"
	}); err != nil {
		t.Errorf("no heartbeat after the restart: %+v", cp.view(t, env).Health)
	}
	if !op.Running() || op.Pid() != opPid || !mgr.Running() || mgr.Pid() != mgrPid {
		t.Errorf("a process restarted or exited: operator running %v (pid %d→%d), Manager running %v (pid %d→%d)",
			op.Running(), opPid, op.Pid(), mgr.Running(), mgrPid, mgr.Pid())
	}
	figure(t, "kube-apiserver stopped and started (same port and etcd data)", fmt.Sprintf("unreachable %s, mid-convergence (%d/%d proxies converged, a shared step edit and a deploy pending)", outage.Round(100*time.Millisecond), converged, n))
	figure(t, "convergence after the API server answered again", fmt.Sprintf("%s for %d proxies on the edited revision and the deploy; operator and Manager not restarted", recovery.Round(100*time.Millisecond), n+1))
}

func clientKey(ns, name string) client.ObjectKey { return client.ObjectKey{Namespace: ns, Name: name} }
