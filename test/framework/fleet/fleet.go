// Package fleet builds many NexoProxies that share one graph, for the benchmark and the
// reliability suites: the same license, profile, three steps and pipeline in a namespace, and
// proxies numbered proxy-0 … proxy-N-1 that reference them.
package fleet

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/contract/wire"
)

// Entitlements are the licensed step kinds the shared graph uses.
var Entitlements = []string{"NexoTenantIsolation", "NexoRateLimit", "NexoPIIMasking"}

// SharedStep is the NexoRateLimit every proxy's pipeline uses; editing it rolls every proxy.
const SharedStep = "per-client"

// RegistrySecret is a registry credential of the operator namespace marked shareable, as
// nexoctl install --registry-secret creates it; the shared profile names it.
func RegistrySecret(operatorNS string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "nexo-registry", Namespace: operatorNS, Labels: map[string]string{wire.RegistryCredentialLabel: "true"}},
		Type: corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{}}`)}}
}

// Graph is what every proxy in ns references: license (licenseDoc, signed for the entitlements),
// profile, three steps and the pipeline "shared".
func Graph(ns, licenseDoc string) []client.Object {
	return []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "license", Namespace: ns}, Data: map[string][]byte{"license": []byte(licenseDoc)}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "pii-salt", Namespace: ns}, Data: map[string][]byte{"salt": []byte("x")}},
		&nexov1alpha1.NexoLicense{ObjectMeta: metav1.ObjectMeta{Name: "fleet", Namespace: ns},
			Spec: nexov1alpha1.NexoLicenseSpec{SecretRef: nexov1alpha1.SecretKeyReference{Name: "license", Key: "license"}}},
		Profile(ns),
		&nexov1alpha1.NexoTenantIsolation{ObjectMeta: metav1.ObjectMeta{Name: "tenant", Namespace: ns},
			Spec: nexov1alpha1.NexoTenantIsolationSpec{TenantField: "tenantId", Source: nexov1alpha1.TenantSource{Type: "Username"}}},
		&nexov1alpha1.NexoRateLimit{ObjectMeta: metav1.ObjectMeta{Name: SharedStep, Namespace: ns},
			Spec: nexov1alpha1.NexoRateLimitSpec{OperationsPerSecond: 100}},
		&nexov1alpha1.NexoPIIMasking{ObjectMeta: metav1.ObjectMeta{Name: "mask", Namespace: ns},
			Spec: nexov1alpha1.NexoPIIMaskingSpec{Rules: []nexov1alpha1.MaskingRule{{FieldPattern: "customers.*.ssn", Action: "Redact"}}}},
		&nexov1alpha1.NexoPipeline{ObjectMeta: metav1.ObjectMeta{Name: "shared", Namespace: ns},
			Spec: nexov1alpha1.NexoPipelineSpec{
				Request:  []nexov1alpha1.RequestStepRef{{Kind: "NexoTenantIsolation", Name: "tenant"}, {Kind: "NexoRateLimit", Name: SharedStep}},
				Response: []nexov1alpha1.ResponseStepRef{{Kind: "NexoPIIMasking", Name: "mask"}},
			}},
	}
}

// Profile is the shared NexoDeploymentProfile "standard" of ns.
func Profile(ns string) *nexov1alpha1.NexoDeploymentProfile {
	return &nexov1alpha1.NexoDeploymentProfile{ObjectMeta: metav1.ObjectMeta{Name: "standard", Namespace: ns},
		Spec: nexov1alpha1.NexoDeploymentProfileSpec{
			Images:              nexov1alpha1.RuntimeImages{Ingress: "registry.example.com/nexo/ingress:0.2.0", Egress: "registry.example.com/nexo/egress:0.2.0"},
			StepCatalog:         []nexov1alpha1.StepImage{{Kind: "NexoPIIMasking", Image: "registry.example.com/nexo/pii:0.2.0"}},
			ImagePullSecrets:    []nexov1alpha1.SecretReference{{Name: "nexo-registry"}},
			DrainTimeoutSeconds: 30,
		}}
}

// Proxy is proxy-i of ns, one replica, on the shared graph.
func Proxy(ns string, i int) *nexov1alpha1.NexoProxy {
	return &nexov1alpha1.NexoProxy{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("proxy-%d", i), Namespace: ns},
		Spec: nexov1alpha1.NexoProxySpec{
			PipelineRef: nexov1alpha1.LocalObjectReference{Name: "shared"},
			Upstream:    nexov1alpha1.Target{Name: "primary", Address: "mongo.db.svc:27017"},
			ProfileRef:  nexov1alpha1.LocalObjectReference{Name: "standard"},
			LicenseRef:  nexov1alpha1.LocalObjectReference{Name: "fleet"},
			Replicas:    ptr.To[int32](1),
			Port:        27017,
		}}
}

// Parallel runs f(0) … f(count-1) on workers goroutines and returns the first error.
func Parallel(count, workers int, f func(int) error) error {
	var wg sync.WaitGroup
	errs := make(chan error, count)
	next := make(chan int)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := f(i); err != nil {
					errs <- err
				}
			}
		}()
	}
	for i := 0; i < count; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	return <-errs
}

// Converged is a proxy Ready at its current generation, with its desired revision available.
func Converged(p *nexov1alpha1.NexoProxy) bool {
	return p.Status.Phase == nexov1alpha1.ProxyReady && p.Status.ObservedGeneration == p.Generation &&
		p.Status.GraphRevision != "" && p.Status.AvailableRevision == p.Status.GraphRevision
}

// Wait waits until count proxies of ns satisfy ok, or timeout passes.
func Wait(ctx context.Context, c client.WithWatch, ns string, count int, timeout time.Duration, ok func(*nexov1alpha1.NexoProxy) bool) error {
	return WaitFor(ctx, c, &nexov1alpha1.NexoProxyList{}, ns, count, timeout, func(o client.Object) bool {
		return ok(o.(*nexov1alpha1.NexoProxy))
	})
}

// WaitFor waits until count objects of list's kind in ns satisfy ok, or timeout passes. It
// lists once and then follows a watch (listing again only when the watch ends), so a wait over
// thousands of objects costs the API server what changes, not a full list every interval: the
// benchmark measures the operator, not its own polling.
func WaitFor(ctx context.Context, c client.WithWatch, list client.ObjectList, ns string, count int, timeout time.Duration, ok func(client.Object) bool) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var t tally
	var lastErr error
	for {
		if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
			lastErr = err
		} else {
			items, err := meta.ExtractList(list)
			if err != nil {
				return err
			}
			t = tally{done: make(map[string]bool, len(items))}
			for _, item := range items {
				o := item.(client.Object)
				t.set(o.GetName(), ok(o))
			}
			if t.n == count {
				return nil
			}
			w, err := c.Watch(ctx, list, client.InNamespace(ns), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.GetResourceVersion()}})
			if err != nil {
				lastErr = err
			} else if t.follow(w, count, ok) {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d objects in %s done after %s (last error: %v)", t.n, count, ns, timeout, lastErr)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// tally counts the objects that are done, by name.
type tally struct {
	done map[string]bool
	n    int
}

func (t *tally) set(name string, done bool) {
	if t.done[name] {
		t.n--
	}
	t.done[name] = done
	if done {
		t.n++
	}
}

// follow applies a watch's events until count objects are done (true) or the watch ends
// (false: list again).
func (t *tally) follow(w watch.Interface, count int, ok func(client.Object) bool) bool {
	defer w.Stop()
	for ev := range w.ResultChan() {
		o, isObj := ev.Object.(client.Object)
		switch {
		case ev.Type == watch.Error || !isObj:
			return false
		case ev.Type == watch.Deleted:
			t.set(o.GetName(), false)
		case ev.Type == watch.Added || ev.Type == watch.Modified:
			t.set(o.GetName(), ok(o))
		}
		if t.n == count {
			return true
		}
	}
	return false
}
