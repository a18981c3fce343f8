package scale_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/contract/protocol"
	"github.com/nexo-io/nexo-edge/contract/wire"
	"github.com/nexo-io/nexo-edge/preview"
)

const previewNS = "preview-bench"

// previewFleet creates, in previewNS, a profile, a license, a router and a pipeline (all Ready),
// and n NexoProxies on that pipeline, each reporting a graph revision.
func previewFleet(b *testing.B, n int) {
	b.Helper()
	ctx := context.Background()
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: previewNS}}); err != nil {
		b.Fatal(err)
	}
	ready := func(o nexov1alpha1.Object) {
		if err := admin.Create(ctx, o); err != nil {
			b.Fatal(err)
		}
		meta.SetStatusCondition(&o.NexoStatus().Conditions, metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Valid", Message: "valid", ObservedGeneration: o.GetGeneration()})
		if err := admin.Status().Update(ctx, o); err != nil {
			b.Fatal(err)
		}
	}
	om := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: previewNS, Name: name} }
	ready(&nexov1alpha1.NexoDeploymentProfile{ObjectMeta: om("standard"), Spec: nexov1alpha1.NexoDeploymentProfileSpec{
		Images: nexov1alpha1.RuntimeImages{Ingress: "registry.example.com/nexo/ingress:0.2.0", Egress: "registry.example.com/nexo/egress:0.2.0"}}})
	ready(&nexov1alpha1.NexoLicense{ObjectMeta: om("acme"), Spec: nexov1alpha1.NexoLicenseSpec{SecretRef: nexov1alpha1.SecretKeyReference{Name: "acme-license", Key: "license"}}})
	ready(routerSpec("mongo-0.db.svc:27017"))
	ready(&nexov1alpha1.NexoPipeline{ObjectMeta: om("orders"), Spec: nexov1alpha1.NexoPipelineSpec{Router: &nexov1alpha1.RouterRef{Kind: "NexoRouter", Name: "by-database"}}})
	work := make(chan int)
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				p := &nexov1alpha1.NexoProxy{ObjectMeta: metav1.ObjectMeta{Namespace: previewNS, Name: fmt.Sprintf("p-%05d", i), Labels: map[string]string{wire.OwnerLabel: "env-bench"}},
					Spec: nexov1alpha1.NexoProxySpec{PipelineRef: nexov1alpha1.LocalObjectReference{Name: "orders"}, ProfileRef: nexov1alpha1.LocalObjectReference{Name: "standard"},
						LicenseRef: nexov1alpha1.LocalObjectReference{Name: "acme"}, Upstream: nexov1alpha1.Target{Name: "primary", Address: "mongo-0.db.svc:27017"}}}
				if err := admin.Create(ctx, p); err != nil {
					b.Error(err)
					continue
				}
				p.Status.GraphRevision = "0123456789ab"
				if err := admin.Status().Update(ctx, p); err != nil {
					b.Error(err)
				}
			}
		}()
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
}

func routerSpec(address string) *nexov1alpha1.NexoRouter {
	return &nexov1alpha1.NexoRouter{TypeMeta: metav1.TypeMeta{APIVersion: "nexo.io/v1alpha1", Kind: "NexoRouter"}, ObjectMeta: metav1.ObjectMeta{Namespace: previewNS, Name: "by-database"},
		Spec: nexov1alpha1.NexoRouterSpec{Targets: []nexov1alpha1.Target{{Name: "primary", Address: nexov1alpha1.Address(address)}}, DefaultTarget: "primary"}}
}

// BenchmarkPreview1000Proxies: a preview (package preview, the Manager's code) of a change to
// the router 1,000 proxies share, against a real API server: the dry run, the reads, every
// proxy's graph resolved and rendered before and after. Reports the time and the answer's size.
func BenchmarkPreview1000Proxies(b *testing.B) {
	previewFleet(b, 1000)
	raw, _ := json.Marshal(routerSpec("mongo-1.db.svc:27017"))
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(raw); err != nil {
		b.Fatal(err)
	}
	opts := preview.Options{FieldManager: wire.ManagerFieldManager, OperatorNamespace: "nexo-system",
		Proxies: func(ctx context.Context, ns string) ([]nexov1alpha1.NexoProxy, error) {
			var list nexov1alpha1.NexoProxyList
			err := admin.List(ctx, &list, client.InNamespace(ns))
			return list.Items, err
		}}
	var res *protocol.PreviewResult
	var took time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		var err error
		if res, err = preview.Run(context.Background(), admin, []*unstructured.Unstructured{u.DeepCopy()}, opts); err != nil {
			b.Fatal(err)
		}
		took = time.Since(start)
	}
	b.StopTimer()
	body, _ := json.Marshal(protocol.Ack{Status: protocol.Applied, Preview: res})
	if res.Summary.Changed != 1 || res.Summary.Rolls != 1000 || res.Truncated != "" {
		b.Fatalf("summary %+v, truncated %q", res.Summary, res.Truncated)
	}
	b.ReportMetric(float64(took.Milliseconds()), "preview-ms")
	b.ReportMetric(float64(len(body)), "answer-B")
}
