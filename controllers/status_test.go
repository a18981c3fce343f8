package controllers

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/test/framework/testcluster"
)

// A status written from a stale read fails with a Conflict (and becomes a quiet retry) instead
// of keeping, unseen, the fields the merge patch leaves out; from a fresh read it is written,
// and an unchanged status makes no call at all.
func TestWriteStatusFromAStaleReadConflicts(t *testing.T) {
	ctx := context.Background()
	cl, err := testcluster.Start(ctx, testcluster.Options{CRDDirectoryPaths: []string{testcluster.CRDDir()}})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Stop()
	s := runtime.NewScheme()
	if err := nexov1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cl.Config, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	p := &nexov1alpha1.NexoProxy{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default"}, Spec: nexov1alpha1.NexoProxySpec{
		PipelineRef: nexov1alpha1.LocalObjectReference{Name: "x"}, ProfileRef: nexov1alpha1.LocalObjectReference{Name: "x"},
		LicenseRef: nexov1alpha1.LocalObjectReference{Name: "x"}, Upstream: nexov1alpha1.Target{Name: "t", Address: "db:27017"}}}
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	stale := p.DeepCopy() // what a lagging cache still holds: readyReplicas 0

	// Another pass writes readyReplicas 2 (mid-rollout).
	mid := p.DeepCopy()
	mid.Status.ReadyReplicas = 2
	if err := writeStatus(ctx, c, p, mid); err != nil {
		t.Fatal(err)
	}
	// A pass on the stale read computes readyReplicas 0 → no field in its patch for it.
	after := stale.DeepCopy()
	after.Status.Phase = nexov1alpha1.ProxyReady
	err = writeStatus(ctx, c, stale, after)
	if res, rerr := statusConflict(ctx, err); rerr != nil || res.RequeueAfter == 0 {
		t.Fatalf("stale write: %v → (%v, %v), want a Conflict retried quietly", err, res, rerr)
	}
	got := &nexov1alpha1.NexoProxy{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(p), got); err != nil {
		t.Fatal(err)
	}
	if got.Status.Phase == nexov1alpha1.ProxyReady {
		t.Fatal("the stale write landed")
	}
	// Retried on the fresh read: written, whole.
	fresh := got.DeepCopy()
	fresh.Status.Phase, fresh.Status.ReadyReplicas = nexov1alpha1.ProxyReady, 0
	if err := writeStatus(ctx, c, got, fresh); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(p), got); err != nil || got.Status.Phase != nexov1alpha1.ProxyReady || got.Status.ReadyReplicas != 0 {
		t.Fatalf("fresh write: %+v %v", got.Status, err)
	}
	// Nothing to write: no call (a stale base would conflict if one were made).
	if err := writeStatus(ctx, c, stale, stale.DeepCopy()); err != nil {
		t.Fatalf("no-op write made a call: %v", err)
	}
}
