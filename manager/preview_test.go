package manager_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/contract/protocol"
	"github.com/nexo-io/nexo-edge/test/framework/testcluster"
)

// resourceVersions are the resourceVersions of every Nexo object and Deployment in shop.
func resourceVersions(t *testing.T) map[string]string {
	t.Helper()
	out, err := testcluster.ResourceVersions(context.Background(), k8s, "shop", &appsv1.DeploymentList{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// withRateLimit is the sample graph with per-client's spec changed by edit.
func withRateLimit(t *testing.T, edit func(spec map[string]any)) []json.RawMessage {
	t.Helper()
	out := sampleManifests(t)
	for i, raw := range out {
		u := &unstructured.Unstructured{}
		_ = u.UnmarshalJSON(raw)
		if u.GetKind() == "NexoRateLimit" {
			edit(u.Object["spec"].(map[string]any))
			out[i], _ = u.MarshalJSON()
		}
	}
	return out
}

func readyProxy(t *testing.T, what string, ok func(*nexov1alpha1.NexoProxy) bool) *nexov1alpha1.NexoProxy {
	t.Helper()
	p := &nexov1alpha1.NexoProxy{}
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "orders-proxy"}, p); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return p.Status.Phase == nexov1alpha1.ProxyReady && p.Status.ObservedGeneration == p.Generation && ok(p), nil
	})
	if err != nil {
		t.Fatalf("%s: %+v", what, p.Status)
	}
	return p
}

func proxyPrediction(t *testing.T, res *protocol.PreviewResult, name string) protocol.ProxyPreview {
	t.Helper()
	for _, p := range res.Proxies {
		if p.Namespace == "shop" && p.Name == name {
			return p
		}
	}
	t.Fatalf("no prediction for shop/%s: %+v", name, res.Proxies)
	return protocol.ProxyPreview{}
}

// A preview through the Manager (its own RBAC, a real API server, the operator running) writes
// nothing, names the field a change moves and predicts the graph revision the operator then
// renders when the same manifests are deployed; a change the API server refuses is reported
// refused, with its reason, and nothing is written either.
func TestPreviewPredictsTheDeploy(t *testing.T) {
	a := newAgent(t)
	deployID := enqueue(t, protocol.Command{Type: protocol.Deploy, Namespaces: []string{"shop"}, Manifests: sampleManifests(t)})
	round(t, a)
	if c := commandStatus(t, deployID); c.Status != protocol.Applied {
		t.Fatalf("deploy: %+v", c)
	}
	before := readyProxy(t, "the sample proxy is Ready", func(p *nexov1alpha1.NexoProxy) bool { return p.Status.GraphRevision != "" })
	beforeDep := &appsv1.Deployment{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: "shop", Name: "orders-proxy"}, beforeDep); err != nil {
		t.Fatal(err)
	}
	rvs := resourceVersions(t)

	faster := withRateLimit(t, func(spec map[string]any) { spec["operationsPerSecond"] = int64(700) })
	previewID := enqueue(t, protocol.Command{Type: protocol.Preview, Namespaces: []string{"shop"}, Manifests: faster})
	round(t, a)
	c := commandStatus(t, previewID)
	if c.Status != protocol.Applied || c.Result == nil || !strings.Contains(c.Message, "nothing was changed") {
		t.Fatalf("preview: %+v", c)
	}
	res := c.Result
	var changed []protocol.ObjectPreview
	for _, o := range res.Objects {
		if o.Outcome == protocol.ObjectChanged {
			changed = append(changed, o)
		}
	}
	if len(changed) != 1 || changed[0].Kind != "NexoRateLimit" || len(changed[0].Changes) != 1 || changed[0].Changes[0].Path != "/spec/operationsPerSecond" ||
		res.Summary.Changed != 1 || res.Summary.Unchanged != len(faster)-1 {
		t.Fatalf("objects: %+v summary %+v", changed, res.Summary)
	}
	// Every proxy of shop on the sample pipeline is predicted (another test's unowned proxy
	// may share it: a shared pipeline moves every proxy using it).
	predicted := proxyPrediction(t, res, "orders-proxy")
	if predicted.Before != before.Status.GraphRevision || predicted.After == "" || predicted.After == predicted.Before || predicted.Outcome != protocol.ProxyRolls {
		t.Fatalf("proxies: %+v (the proxy runs %s)", res.Proxies, before.Status.GraphRevision)
	}
	for _, x := range res.Proxies {
		other := &nexov1alpha1.NexoProxy{}
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: x.Namespace, Name: x.Name}, other); err != nil || other.Spec.PipelineRef.Name != "orders" || x.Outcome != protocol.ProxyRolls {
			t.Errorf("predicted %+v, which is not a proxy on the changed pipeline (%v)", x, err)
		}
	}
	if after := resourceVersions(t); len(after) != len(rvs) {
		t.Errorf("the preview changed the set of objects: %d → %d", len(rvs), len(after))
	} else {
		for k, v := range rvs {
			if after[k] != v {
				t.Errorf("the preview wrote %s (resourceVersion %s → %s)", k, v, after[k])
			}
		}
	}

	// The deploy of the same manifests: the operator renders exactly the predicted revision and
	// the pods roll; the acknowledgement carries the same prediction.
	deployID = enqueue(t, protocol.Command{Type: protocol.Deploy, Namespaces: []string{"shop"}, Manifests: faster})
	round(t, a)
	d := commandStatus(t, deployID)
	if d.Status != protocol.Applied || d.Result == nil || proxyPrediction(t, d.Result, "orders-proxy") != predicted {
		t.Fatalf("deploy's prediction %+v, the preview's %+v", d.Result, res.Proxies)
	}
	p := readyProxy(t, "the proxy runs the new graph", func(p *nexov1alpha1.NexoProxy) bool { return p.Status.GraphRevision != before.Status.GraphRevision })
	if p.Status.GraphRevision != predicted.After {
		t.Errorf("the operator rendered %s, the preview predicted %s", p.Status.GraphRevision, predicted.After)
	}
	dep := &appsv1.Deployment{}
	_ = k8s.Get(context.Background(), client.ObjectKey{Namespace: "shop", Name: "orders-proxy"}, dep)
	if dep.Generation == beforeDep.Generation {
		t.Errorf("the predicted roll did not happen: the Deployment stayed at generation %d", dep.Generation)
	}

	// The same manifests again: nothing changes, nothing rolls.
	again := enqueue(t, protocol.Command{Type: protocol.Preview, Namespaces: []string{"shop"}, Manifests: faster})
	round(t, a)
	if c := commandStatus(t, again); c.Result == nil || c.Result.Summary.Changed != 0 || c.Result.Summary.Rolls != 0 {
		t.Errorf("preview of what runs: %+v", c.Result)
	} else if x := proxyPrediction(t, c.Result, "orders-proxy"); x.Outcome != protocol.ProxyUnchanged || x.Before != p.Status.GraphRevision || x.After != p.Status.GraphRevision {
		t.Errorf("preview of what runs: %+v", x)
	}

	// A burst below the rate breaks the kind's CEL rule: refused by the API server, named.
	rvs = resourceVersions(t)
	bad := withRateLimit(t, func(spec map[string]any) { spec["burst"] = int64(10) })
	refused := enqueue(t, protocol.Command{Type: protocol.Preview, Namespaces: []string{"shop"}, Manifests: bad})
	round(t, a)
	c = commandStatus(t, refused)
	if c.Status != protocol.Applied || c.Result == nil || c.Result.Summary.Refused != 1 {
		t.Fatalf("preview of an invalid object: %+v", c)
	}
	for _, o := range c.Result.Objects {
		if o.Outcome == protocol.ObjectRefused && (o.Kind != "NexoRateLimit" || !strings.Contains(o.Reason, "burst must be at least operationsPerSecond")) {
			t.Errorf("refused %+v", o)
		}
	}
	for k, v := range resourceVersions(t) {
		if rvs[k] != v {
			t.Errorf("the refused preview wrote %s", k)
		}
	}
	// Deployed, the same manifests are refused whole, as before.
	badDeploy := enqueue(t, protocol.Command{Type: protocol.Deploy, Namespaces: []string{"shop"}, Manifests: bad})
	round(t, a)
	if c := commandStatus(t, badDeploy); c.Status != protocol.Failed || !strings.Contains(c.Message, "the API server refused NexoRateLimit shop/per-client") || !strings.Contains(c.Message, "nothing was applied") {
		t.Errorf("deploy of an invalid object: %+v", c)
	}
}
