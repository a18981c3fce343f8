package reliability_test

import (
	"context"
	"fmt"
	"math/rand"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nexo-io/nexo-edge/contract/scheme"
	"github.com/nexo-io/nexo-edge/test/framework/randomgraph"
	"github.com/nexo-io/nexo-edge/test/framework/testcluster"
)

// TestRenderedObjectsAreAccepted renders random graphs within what the CRDs admit (the
// generator FuzzRender fuzzes) and has a real API server validate every object (a server-side
// dry-run create): it accepts all of them, or the operator would write what the API server
// refuses, and the proxy would stall half-applied.
func TestRenderedObjectsAreAccepted(t *testing.T) {
	ctx := context.Background()
	graphs := 300
	cl, err := testcluster.Start(ctx, testcluster.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Stop()
	c, err := client.New(cl.Config, client.Options{Scheme: scheme.New()})
	must(t, err)
	r := rand.New(rand.NewSource(1))
	objects, refused := 0, 0
	for i := 0; i < graphs; i++ {
		data := make([]byte, 4000)
		r.Read(data)
		g := randomgraph.FromBytes(data)
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: g.Proxy.Namespace}}
		if err := c.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		for _, o := range randomgraph.Objects(g) {
			objects++
			if err := c.Create(ctx, o, client.DryRunAll); err != nil {
				refused++
				if refused <= 10 {
					t.Errorf("graph %d: the API server refuses %T %s/%s: %v", i, o, o.GetNamespace(), o.GetName(), err)
				}
			}
		}
	}
	figure(t, "rendered objects of random graphs sent to the API server (dry run)", fmt.Sprintf("%d graphs, %d objects, %d refused", graphs, objects, refused))
}
