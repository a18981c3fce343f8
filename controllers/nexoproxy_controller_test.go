package controllers_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/catalog"
	"github.com/nexo-io/nexo-edge/contract/license"
	"github.com/nexo-io/nexo-edge/contract/signature"
	"github.com/nexo-io/nexo-edge/contract/wire"
	"github.com/nexo-io/nexo-edge/controllers/render"
)

const proxyName = "orders-proxy"

func validLicense(t *testing.T) []byte {
	return licenseDoc(t, time.Now().Add(365*24*time.Hour), allStepKinds)
}

// waitProxy polls until ok holds for the proxy and returns it; on timeout it fails with the
// proxy's last status.
func waitProxy(t *testing.T, ns string, timeout time.Duration, what string, ok func(*nexov1alpha1.NexoProxy) bool) *nexov1alpha1.NexoProxy {
	t.Helper()
	p := &nexov1alpha1.NexoProxy{}
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: proxyName}, p); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return ok(p), nil
	})
	if err != nil {
		st, _ := json.MarshalIndent(p.Status, "", "  ")
		t.Fatalf("proxy %s/%s: %s did not happen within %s; status:\n%s", ns, proxyName, what, timeout, st)
	}
	return p
}

func isReady(p *nexov1alpha1.NexoProxy) bool {
	return p.Status.Phase == nexov1alpha1.ProxyReady && p.Status.ObservedGeneration == p.Generation
}

func readyReason(p *nexov1alpha1.NexoProxy) (string, string) {
	c := meta.FindStatusCondition(p.Status.Conditions, nexov1alpha1.ConditionReady)
	if c == nil {
		return "", ""
	}
	return c.Reason, c.Message
}

func hasReason(reason string) func(*nexov1alpha1.NexoProxy) bool {
	return func(p *nexov1alpha1.NexoProxy) bool { r, _ := readyReason(p); return r == reason }
}

func deployment(t *testing.T, ns string) *appsv1.Deployment {
	t.Helper()
	d := &appsv1.Deployment{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: proxyName}, d); err != nil {
		t.Fatal(err)
	}
	return d
}

// childReads lists the operator's GETs of a proxy's children (not lists or watches).
func (o *runningOperator) childReads(ns, proxy string) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []string
	for _, path := range o.reads {
		for _, child := range []string{"/deployments/" + proxy, "/services/" + proxy, "/configmaps/" + proxy + "-", "/secrets/" + proxy + "-pull-"} {
			if strings.Contains(path, "/namespaces/"+ns+child) {
				out = append(out, path)
			}
		}
	}
	return out
}

func TestCompleteGraphBecomesReady(t *testing.T) {
	ns := "graph"
	applyGraph(t, ns, validLicense(t), nil)
	p := waitProxy(t, ns, 2*time.Minute, "Ready", isReady)
	// The operator created the children and knows what they hold: it never read them back.
	if reads := op.childReads(ns, proxyName); len(reads) > 0 {
		t.Errorf("a new proxy's children were read from the API server while it converged: %v", reads)
	}

	for _, c := range []string{nexov1alpha1.ConditionValidated, nexov1alpha1.ConditionReferencesResolved, nexov1alpha1.ConditionLicensed, nexov1alpha1.ConditionWorkloadAvailable, nexov1alpha1.ConditionReady} {
		if !meta.IsStatusConditionTrue(p.Status.Conditions, c) {
			t.Errorf("condition %s is not True: %+v", c, meta.FindStatusCondition(p.Status.Conditions, c))
		}
	}
	if len(p.Status.GraphRevision) != 12 || len(p.Status.ConfigHash) != 16 || p.Status.ReadyReplicas != 2 || p.Status.Replicas != 2 {
		t.Errorf("status revision %q hash %q replicas %d/%d", p.Status.GraphRevision, p.Status.ConfigHash, p.Status.ReadyReplicas, p.Status.Replicas)
	}
	d := deployment(t, ns)
	var containers []string
	for _, c := range d.Spec.Template.Spec.Containers {
		containers = append(containers, c.Name)
	}
	if want := []string{"ingress", "egress", "step-tenantisolation", "step-piimasking"}; !slices.Equal(containers, want) {
		t.Errorf("containers %v, want %v", containers, want)
	}
	if got := d.Spec.Template.Annotations[render.ConfigHashKey]; got != p.Status.ConfigHash {
		t.Errorf("pod template config hash %q, status %q", got, p.Status.ConfigHash)
	}
	ctx := context.Background()
	children := []client.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: render.RoutingName(proxyName, p.Status.GraphRevision)}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: render.StepsName(proxyName, p.Status.GraphRevision)}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: proxyName}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: proxyName + "-pull-nexo-registry"}},
		d,
	}
	for _, c := range children {
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: c.GetName()}, c); err != nil {
			t.Errorf("child %T %s: %v", c, c.GetName(), err)
			continue
		}
		if !metav1.IsControlledBy(c, p) {
			t.Errorf("child %T %s is not controller-owned by the proxy", c, c.GetName())
		}
	}
	svc := children[2].(*corev1.Service)
	if len(svc.Spec.Ports) != 2 || svc.Spec.Ports[1].Name != "metrics" || svc.Spec.Ports[1].Port != 9216 {
		t.Errorf("service ports %+v, want mongodb and metrics 9216", svc.Spec.Ports)
	}
	// Every component the graph uses is Ready.
	step := &nexov1alpha1.NexoPIIMasking{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "mask-pii"}, step); err != nil || !meta.IsStatusConditionTrue(step.Status.Conditions, "Ready") || step.Status.ObservedGeneration != step.Generation {
		t.Errorf("step status %+v (%v)", step.Status, err)
	}
	lic := &nexov1alpha1.NexoLicense{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "acme"}, lic); err != nil || lic.Status.Licensee != "Acme Corp" || lic.Status.MaxProxies != 5 || len(lic.Status.Entitlements) != len(allStepKinds) {
		t.Errorf("license status %+v (%v)", lic.Status, err)
	}
	// No secret material in the proxy's or the license's status.
	for _, obj := range []any{p.Status, lic.Status} {
		raw, _ := json.Marshal(obj)
		for _, secret := range []string{"s3cret", "pepper", "nexo-license-v1"} {
			if strings.Contains(string(raw), secret) {
				t.Errorf("status contains secret material %q: %s", secret, raw)
			}
		}
	}
}

func TestStepEditRollsPods(t *testing.T) {
	ns := "edit"
	applyGraph(t, ns, validLicense(t), nil)
	before := waitProxy(t, ns, 2*time.Minute, "Ready", isReady)
	ctx := context.Background()
	rl := &nexov1alpha1.NexoRateLimit{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "per-client"}, rl); err != nil {
		t.Fatal(err)
	}
	rl.Spec.OperationsPerSecond = 750
	if err := k8s.Update(ctx, rl); err != nil {
		t.Fatal(err)
	}
	after := waitProxy(t, ns, 2*time.Minute, "new revision Ready", func(p *nexov1alpha1.NexoProxy) bool {
		return isReady(p) && p.Status.GraphRevision != before.Status.GraphRevision
	})
	if after.Status.ConfigHash == before.Status.ConfigHash {
		t.Error("config hash did not change with the step")
	}
	pods := &corev1.PodList{}
	if err := k8s.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{wire.ProxyLabel: proxyName}); err != nil {
		t.Fatal(err)
	}
	for _, pod := range pods.Items {
		if pod.DeletionTimestamp == nil && pod.Annotations[render.ConfigHashKey] != after.Status.ConfigHash {
			t.Errorf("pod %s still runs config %s", pod.Name, pod.Annotations[render.ConfigHashKey])
		}
	}
	// A Secret referenced by a step rolls the pods too.
	salt := &corev1.Secret{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "pii-salt"}, salt); err != nil {
		t.Fatal(err)
	}
	salt.Data["salt"] = []byte("paprika")
	if err := k8s.Update(ctx, salt); err != nil {
		t.Fatal(err)
	}
	waitProxy(t, ns, 2*time.Minute, "config hash change after a Secret edit", func(p *nexov1alpha1.NexoProxy) bool {
		return isReady(p) && p.Status.ConfigHash != after.Status.ConfigHash && p.Status.GraphRevision == after.Status.GraphRevision
	})
}

func TestTamperedManagedStepFailsStatic(t *testing.T) {
	ns := "tamper"
	applyGraph(t, ns, validLicense(t), func(kind string, u *unstructured.Unstructured) bool {
		if kind == "NexoRateLimit" {
			u.SetNamespace(ns)
			if err := signature.Sign(u, cpKey, signedFor(1)); err != nil {
				t.Fatal(err)
			}
		}
		return true
	})
	good := waitProxy(t, ns, 2*time.Minute, "Ready", isReady)
	ctx := context.Background()
	rl := &nexov1alpha1.NexoRateLimit{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "per-client"}, rl); err != nil {
		t.Fatal(err)
	}
	if !meta.IsStatusConditionTrue(rl.Status.Conditions, nexov1alpha1.ConditionSignatureValid) {
		t.Fatalf("signed step not SignatureValid: %+v", rl.Status.Conditions)
	}
	cmBefore := &corev1.ConfigMap{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: render.StepsName(proxyName, good.Status.GraphRevision)}, cmBefore); err != nil {
		t.Fatal(err)
	}
	rl.Spec.OperationsPerSecond = 999 // edited without re-signing
	if err := k8s.Update(ctx, rl); err != nil {
		t.Fatal(err)
	}
	p := waitProxy(t, ns, time.Minute, "Degraded naming the signature failure", func(p *nexov1alpha1.NexoProxy) bool {
		_, msg := readyReason(p)
		return p.Status.Phase == nexov1alpha1.ProxyDegraded && strings.Contains(msg, "SignatureMismatch")
	})
	reason, msg := readyReason(p)
	if reason != nexov1alpha1.ReasonReferenceNotReady || !strings.Contains(msg, "SignatureMismatch") || !strings.Contains(msg, "per-client") {
		t.Errorf("Ready reason %s: %s", reason, msg)
	}
	if p.Status.GraphRevision != good.Status.GraphRevision || p.Status.ConfigHash != good.Status.ConfigHash {
		t.Errorf("status moved off the last good revision: %s/%s", p.Status.GraphRevision, p.Status.ConfigHash)
	}
	d := deployment(t, ns)
	if d.Spec.Template.Annotations[render.GraphRevisionKey] != good.Status.GraphRevision {
		t.Errorf("Deployment now runs %s, want last good %s", d.Spec.Template.Annotations[render.GraphRevisionKey], good.Status.GraphRevision)
	}
	cmAfter := &corev1.ConfigMap{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: render.StepsName(proxyName, good.Status.GraphRevision)}, cmAfter); err != nil {
		t.Fatal(err)
	}
	if cmAfter.Data["steps.json"] != cmBefore.Data["steps.json"] || strings.Contains(cmAfter.Data["steps.json"], "999") {
		t.Error("tampered step config reached the steps ConfigMap")
	}
	if !meta.IsStatusConditionTrue(p.Status.Conditions, nexov1alpha1.ConditionWorkloadAvailable) {
		t.Error("the last good workload should still be reported available")
	}
}

func TestExpiredLicenseBlocks(t *testing.T) {
	ns := "lic-expired"
	applyGraph(t, ns, licenseDoc(t, time.Now().Add(-time.Hour), allStepKinds), nil)
	p := waitProxy(t, ns, time.Minute, "blocked by the license", hasReason(nexov1alpha1.ReasonLicenseExpired))
	_, msg := readyReason(p)
	if p.Status.Phase != nexov1alpha1.ProxyFailed || !strings.Contains(msg, "expired") {
		t.Errorf("phase %s message %q", p.Status.Phase, msg)
	}
	if c := meta.FindStatusCondition(p.Status.Conditions, nexov1alpha1.ConditionLicensed); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("Licensed condition %+v", c)
	}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: proxyName}, &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
		t.Errorf("an unlicensed proxy got a Deployment (%v)", err)
	}
}

func TestMissingEntitlementBlocks(t *testing.T) {
	ns := "lic-entitle"
	without := slices.DeleteFunc(slices.Clone(allStepKinds), func(k string) bool { return k == "NexoPIIMasking" })
	applyGraph(t, ns, licenseDoc(t, time.Now().Add(time.Hour*24), without), nil)
	p := waitProxy(t, ns, time.Minute, "blocked by entitlement", hasReason(nexov1alpha1.ReasonMissingEntitlement))
	if _, msg := readyReason(p); !strings.Contains(msg, "NexoPIIMasking") {
		t.Errorf("message does not name the missing entitlement: %s", msg)
	}
}

func TestSchemaOnlyReference(t *testing.T) {
	ns := "schema-only"
	applyGraph(t, ns, validLicense(t), func(kind string, u *unstructured.Unstructured) bool {
		if kind == "NexoPipeline" {
			req, _, _ := unstructured.NestedSlice(u.Object, "spec", "request")
			req = append(req, map[string]any{"kind": "NexoQueryGuard", "name": "no-where"})
			_ = unstructured.SetNestedSlice(u.Object, req, "spec", "request")
		}
		return true
	})
	qg := sampleGraph(t)["NexoQueryGuard"]
	qg.SetNamespace(ns)
	if err := k8s.Create(context.Background(), qg); err != nil {
		t.Fatal(err)
	}
	p := waitProxy(t, ns, time.Minute, "UnsupportedReference", hasReason(nexov1alpha1.ReasonUnsupportedReference))
	_, msg := readyReason(p)
	if !strings.Contains(msg, "NexoQueryGuard") || !strings.Contains(msg, catalog.BuildVersion) {
		t.Errorf("message must name the kind and the build: %s", msg)
	}
	pl := &nexov1alpha1.NexoPipeline{}
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "orders"}, pl); err != nil {
			return false, err
		}
		c := meta.FindStatusCondition(pl.Status.Conditions, "Ready")
		return c != nil && c.Reason == nexov1alpha1.ReasonUnsupportedReference, nil
	})
	if err != nil {
		t.Errorf("pipeline does not report UnsupportedReference: %+v", pl.Status)
	}
	// The schema-only object is stored but never reconciled.
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(qg), qg); err != nil {
		t.Fatal(err)
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(qg.Object, "status", "conditions"); found {
		t.Error("a schema-only object got status from the operator")
	}
}

func TestMissingReferenceBecomesReadyOnceCreated(t *testing.T) {
	ns := "missing"
	var profile *unstructured.Unstructured
	applyGraph(t, ns, validLicense(t), func(kind string, u *unstructured.Unstructured) bool {
		if kind == "NexoDeploymentProfile" {
			profile = u
			return false
		}
		return true
	})
	p := waitProxy(t, ns, time.Minute, "ReferenceNotFound naming the profile", func(p *nexov1alpha1.NexoProxy) bool {
		reason, msg := readyReason(p)
		return reason == nexov1alpha1.ReasonReferenceNotFound && strings.Contains(msg, "NexoDeploymentProfile standard (spec.profileRef) not found")
	})
	if p.Status.Phase != nexov1alpha1.ProxyPending {
		t.Errorf("phase %s, want Pending while a reference is missing", p.Status.Phase)
	}
	profile.SetNamespace(ns)
	if err := k8s.Create(context.Background(), profile); err != nil {
		t.Fatal(err)
	}
	waitProxy(t, ns, 2*time.Minute, "Ready after the profile appears", isReady)
}

func TestDriftIsCorrected(t *testing.T) {
	ns := "drift"
	applyGraph(t, ns, validLicense(t), nil)
	waitProxy(t, ns, 2*time.Minute, "Ready", isReady)
	ctx := context.Background()
	d := deployment(t, ns)
	oldUID := d.UID
	if err := k8s.Delete(ctx, d); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		nd := &appsv1.Deployment{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: proxyName}, nd); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return nd.UID != oldUID, nil
	})
	if err != nil {
		t.Fatal("deleted Deployment was not recreated")
	}
	svc := &corev1.Service{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: proxyName}, svc); err != nil {
		t.Fatal(err)
	}
	svc.Spec.Ports[0].Port = 9999
	svc.Spec.Ports = svc.Spec.Ports[:1] // drop the metrics port
	if err := k8s.Update(ctx, svc); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: proxyName}, svc); err != nil {
			return false, err
		}
		return len(svc.Spec.Ports) == 2 && svc.Spec.Ports[0].Port == 27017, nil
	})
	if err != nil {
		t.Fatalf("edited Service was not corrected: %+v", svc.Spec.Ports)
	}
	// The caches hold only the children's metadata: edits of a ConfigMap's data, of the pod
	// template and of the Deployment's labels must still be seen and corrected.
	tamperChildren(t, ns)
	waitChildrenCorrected(t, ns)
	waitProxy(t, ns, 2*time.Minute, "Ready again", isReady)
}

// routingName is the name of the proxy's routing ConfigMap at its current revision.
func routingName(t *testing.T, ns string) string {
	t.Helper()
	p := &nexov1alpha1.NexoProxy{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: proxyName}, p); err != nil || p.Status.GraphRevision == "" {
		t.Fatalf("proxy revision: %v (%q)", err, p.Status.GraphRevision)
	}
	return render.RoutingName(proxyName, p.Status.GraphRevision)
}

// tamperChildren edits, behind the operator's back, what its caches do not hold: a ConfigMap
// (immutable: the API server refuses the edit, so it is deleted instead), the Deployment's pod
// template, and a label of the Deployment.
func tamperChildren(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	cm := &corev1.ConfigMap{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: routingName(t, ns)}, cm); err != nil {
		t.Fatal(err)
	}
	cm.Data["routing.json"] = `{"upstream":"evil:27017"}`
	if err := k8s.Update(ctx, cm); err == nil || !strings.Contains(err.Error(), "immutable") {
		t.Fatalf("an edit of a revision's config was not refused as immutable: %v", err)
	}
	if err := k8s.Delete(ctx, cm); err != nil {
		t.Fatal(err)
	}
	d := deployment(t, ns)
	d.Spec.Template.Spec.Containers[0].Image = "registry.example.com/evil:1"
	d.Labels[wire.ProxyLabel] = "someone-else"
	if err := k8s.Update(ctx, d); err != nil {
		t.Fatal(err)
	}
}

func waitChildrenCorrected(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	var cm corev1.ConfigMap
	var d appsv1.Deployment
	name := routingName(t, ns)
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &cm); err != nil {
			return false, client.IgnoreNotFound(err) // deleted: recreated by the next pass
		}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: proxyName}, &d); err != nil {
			return false, err
		}
		return !strings.Contains(cm.Data["routing.json"], "evil") && !strings.Contains(d.Spec.Template.Spec.Containers[0].Image, "evil") &&
			d.Labels[wire.ProxyLabel] == proxyName, nil
	})
	if err != nil {
		t.Fatalf("tampered children were not corrected: routing %s, image %s, labels %v", cm.Data["routing.json"], d.Spec.Template.Spec.Containers[0].Image, d.Labels)
	}
}

func TestDeletingProxyCollectsChildren(t *testing.T) {
	ns := "gc"
	applyGraph(t, ns, validLicense(t), nil)
	p := waitProxy(t, ns, 2*time.Minute, "Ready", isReady)
	ctx := context.Background()
	if err := k8s.Delete(ctx, p); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		var n int
		for _, list := range []client.ObjectList{&appsv1.DeploymentList{}, &corev1.ServiceList{}, &corev1.ConfigMapList{}, &corev1.SecretList{}, &corev1.PodList{}} {
			if err := k8s.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{wire.ProxyLabel: proxyName}); err != nil {
				return false, err
			}
			n += meta.LenList(list)
		}
		return n == 0, nil
	})
	if err != nil {
		t.Fatal("children were not garbage-collected after the proxy was deleted")
	}
}

func TestUnownedSameNameObjectIsLeftAlone(t *testing.T) {
	ns := "conflict"
	ctx := context.Background()
	// Someone else's Secret where the proxy's pull-Secret copy would go.
	foreign := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: render.PullSecretName(proxyName, "nexo-registry"), Namespace: ns}, Data: map[string][]byte{"mine": []byte("yes")}}
	if err := k8s.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	applyGraph(t, ns, validLicense(t), nil)
	p := waitProxy(t, ns, time.Minute, "Conflict", hasReason(nexov1alpha1.ReasonConflict))
	if _, msg := readyReason(p); !strings.Contains(msg, "Secret "+foreign.Name) {
		t.Errorf("conflict message must name the object: %s", msg)
	}
	got := &corev1.Secret{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(foreign), got); err != nil {
		t.Fatalf("foreign Secret gone: %v", err)
	}
	if string(got.Data["mine"]) != "yes" || len(got.Data) != 1 || len(got.OwnerReferences) != 0 || got.ResourceVersion != foreign.ResourceVersion {
		t.Errorf("foreign Secret was modified: %+v", got.ObjectMeta)
	}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: proxyName}, &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
		t.Errorf("a conflicting proxy was half-applied: Deployment exists (%v)", err)
	}
}

func TestUnwatchedNamespaceIsIgnored(t *testing.T) {
	ns := "unwatched"
	applyGraph(t, ns, validLicense(t), nil)
	// Give the operator time it would need to act (other namespaces converge in seconds).
	time.Sleep(5 * time.Second)
	p := &nexov1alpha1.NexoProxy{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: proxyName}, p); err != nil {
		t.Fatal(err)
	}
	if len(p.Status.Conditions) != 0 || p.Status.Phase != "" {
		t.Errorf("proxy in an unwatched namespace got status: %+v", p.Status)
	}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: proxyName}, &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
		t.Errorf("proxy in an unwatched namespace got a Deployment (%v)", err)
	}
}

func TestSecretsNeverLogged(t *testing.T) {
	logs := operatorLogs.String()
	if len(logs) == 0 {
		t.Fatal("no operator logs captured")
	}
	for _, secret := range []string{"s3cret-orders", "s3cret-rep", "pepper", "paprika", "nexo-license-v1.", "dXNlcjpwYXNz"} {
		if strings.Contains(logs, secret) {
			t.Errorf("operator logs contain secret material %q", secret)
		}
	}
}

func TestApplyErrorsSurfaceOnStatus(t *testing.T) {
	ns := "nodeport"
	ctx := context.Background()
	taken := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "someone-else", Namespace: ns}, Spec: corev1.ServiceSpec{
		Type: corev1.ServiceTypeNodePort, Selector: map[string]string{"app": "x"},
		Ports: []corev1.ServicePort{{Port: 80, NodePort: 30017}},
	}}
	if err := k8s.Create(ctx, taken); err != nil {
		t.Fatal(err)
	}
	applyGraph(t, ns, validLicense(t), func(kind string, u *unstructured.Unstructured) bool {
		if kind == "NexoProxy" {
			_ = unstructured.SetNestedField(u.Object, map[string]any{"enabled": true, "nodePort": int64(30017)}, "spec", "localAccess")
		}
		return true
	})
	p := waitProxy(t, ns, time.Minute, "ApplyFailed", hasReason(nexov1alpha1.ReasonApplyFailed))
	if _, msg := readyReason(p); !strings.Contains(msg, "Service "+proxyName) || !strings.Contains(msg, "30017") {
		t.Errorf("message must name the Service and the port: %s", msg)
	}
	if err := k8s.Delete(ctx, taken); err != nil {
		t.Fatal(err)
	}
	p = waitProxy(t, ns, 2*time.Minute, "Ready once the port is free", isReady)
	svc := &corev1.Service{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: proxyName}, svc); err != nil || svc.Spec.Type != corev1.ServiceTypeNodePort || svc.Spec.Ports[0].NodePort != 30017 {
		t.Errorf("service %+v (%v)", svc.Spec, err)
	}
}

// TestConflictOnLastChildRollsBack puts a foreign Service where the proxy's Service goes: the
// children created before it in the same pass are removed again, the Service is untouched.
func TestConflictOnLastChildRollsBack(t *testing.T) {
	ns := "conflict-svc"
	ctx := context.Background()
	foreign := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: proxyName, Namespace: ns}, Spec: corev1.ServiceSpec{
		Selector: map[string]string{"app": "theirs"}, Ports: []corev1.ServicePort{{Port: 80}},
	}}
	if err := k8s.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	applyGraph(t, ns, validLicense(t), nil)
	p := waitProxy(t, ns, time.Minute, "Conflict", hasReason(nexov1alpha1.ReasonConflict))
	if _, msg := readyReason(p); !strings.Contains(msg, "Service "+proxyName) {
		t.Errorf("conflict message must name the Service: %s", msg)
	}
	got := &corev1.Service{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(foreign), got); err != nil || got.ResourceVersion != foreign.ResourceVersion || len(got.OwnerReferences) != 0 {
		t.Errorf("foreign Service changed: %+v (%v)", got.ObjectMeta, err)
	}
	// Nothing of the proxy's stays behind (rolled back; GC is not involved).
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var n int
		for _, list := range []client.ObjectList{&appsv1.DeploymentList{}, &corev1.ConfigMapList{}, &corev1.SecretList{}} {
			if err := k8s.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{wire.ProxyLabel: proxyName}); err != nil {
				return false, err
			}
			n += meta.LenList(list)
		}
		return n == 0, nil
	})
	if err != nil {
		t.Error("children created before the conflict were left behind")
	}
}

// TestPullSecretCopiesFollowTheirSource edits the registry Secret in the operator namespace:
// every proxy's copy follows, and the pods roll (the config hash covers pull Secrets).
func TestPullSecretCopiesFollowTheirSource(t *testing.T) {
	ns := "graph" // converged by TestCompleteGraphBecomesReady
	before := waitProxy(t, ns, 2*time.Minute, "Ready", isReady)
	ctx := context.Background()
	src := &corev1.Secret{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: "nexo-registry"}, src); err != nil {
		t.Fatal(err)
	}
	src.Data[corev1.DockerConfigJsonKey] = []byte(`{"auths":{"registry.example.com":{"auth":"bmV3OnBhc3M="}}}`)
	if err := k8s.Update(ctx, src); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		cp := &corev1.Secret{}
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: proxyName + "-pull-nexo-registry"}, cp); err != nil {
			return false, err
		}
		return string(cp.Data[corev1.DockerConfigJsonKey]) == string(src.Data[corev1.DockerConfigJsonKey]), nil
	})
	if err != nil {
		t.Fatal("the pull-Secret copy did not follow its source")
	}
	waitProxy(t, ns, 2*time.Minute, "Ready with a new config hash", func(p *nexov1alpha1.NexoProxy) bool {
		return isReady(p) && p.Status.ConfigHash != before.Status.ConfigHash
	})
}

// TestLicenseMaxProxies: a license for one proxy blocks the second (LicenseExhausted) until the
// first is deleted.
func TestLicenseMaxProxies(t *testing.T) {
	ns := "maxproxies"
	ctx := context.Background()
	doc, err := license.Issue(license.Claims{Licensee: "Acme Corp", ExpiresAt: time.Now().Add(24 * time.Hour), Entitlements: allStepKinds, MaxProxies: 1}, vendorKey)
	if err != nil {
		t.Fatal(err)
	}
	applyGraph(t, ns, []byte(doc), nil)
	waitProxy(t, ns, 2*time.Minute, "Ready", isReady)
	second := &nexov1alpha1.NexoProxy{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: proxyName}, second); err != nil {
		t.Fatal(err)
	}
	first := second.DeepCopy()
	second.ObjectMeta = metav1.ObjectMeta{Name: "second-proxy", Namespace: ns}
	second.Status = nexov1alpha1.NexoProxyStatus{}
	if err := k8s.Create(ctx, second); err != nil {
		t.Fatal(err)
	}
	p := &nexov1alpha1.NexoProxy{}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(second), p); err != nil {
			return false, err
		}
		r, _ := readyReason(p)
		return r == nexov1alpha1.ReasonLicenseExhausted, nil
	})
	if err != nil {
		t.Fatalf("second proxy not blocked by maxProxies: %+v", p.Status)
	}
	if _, msg := readyReason(p); !strings.Contains(msg, "covers 1 proxies") {
		t.Errorf("message: %s", msg)
	}
	if err := k8s.Delete(ctx, first); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(second), p); err != nil {
			return false, err
		}
		return isReady(p), nil
	})
	if err != nil {
		t.Fatalf("second proxy did not take the freed license slot: %+v", p.Status)
	}
}

// TestTamperedPullSecretCopyIsCorrected edits a copy's data (leaving its annotations alone): the
// operator notices and writes the source's content back.
func TestTamperedPullSecretCopyIsCorrected(t *testing.T) {
	ns := "drift" // converged by TestDriftIsCorrected
	waitProxy(t, ns, 2*time.Minute, "Ready", isReady)
	ctx := context.Background()
	cp := &corev1.Secret{}
	key := client.ObjectKey{Namespace: ns, Name: proxyName + "-pull-nexo-registry"}
	if err := k8s.Get(ctx, key, cp); err != nil {
		t.Fatal(err)
	}
	want := string(cp.Data[corev1.DockerConfigJsonKey])
	cp.Data[corev1.DockerConfigJsonKey] = []byte(`{"auths":{"evil.example.com":{}}}`)
	if err := k8s.Update(ctx, cp); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := k8s.Get(ctx, key, cp); err != nil {
			return false, err
		}
		return string(cp.Data[corev1.DockerConfigJsonKey]) == want, nil
	})
	if err != nil {
		t.Fatalf("tampered copy not corrected: %s", cp.Data[corev1.DockerConfigJsonKey])
	}
}
