package controllers

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/contract/license"
	"github.com/nexo-io/nexo-edge/contract/scheme"
	"github.com/nexo-io/nexo-edge/contract/signature"
	"github.com/nexo-io/nexo-edge/controllers/render"
	"github.com/nexo-io/nexo-edge/controllers/slimcache"
)

// Pure table tests of the NexoProxy controller's rules: the phase list, the status computed
// from a pass, the in-sync checks, the watch predicates and the license reasons. The
// integration tests (nexoproxy_controller_test.go and the others) run the same code against an API server.

func TestPhasesFollowTheConditionOrder(t *testing.T) {
	var got []string
	for _, p := range (&ProxyReconciler{}).phases() {
		got = append(got, p.condition)
	}
	if !slices.Equal(got, nexov1alpha1.ProxyPhases) {
		t.Errorf("phases %v, conditions %v", got, nexov1alpha1.ProxyPhases)
	}
}

func TestProxyStatus(t *testing.T) {
	dep := func(gen, observed int64, ready, updated int32, stalled bool) *slimcache.DeploymentState {
		d := &slimcache.DeploymentState{Replicas: 2, Status: slimcache.ReplicaCounts{ObservedGeneration: observed, Replicas: 2, UpdatedReplicas: updated, ReadyReplicas: ready, Available: ready, Stalled: stalled}}
		d.Name, d.Generation = "p", gen
		return d
	}
	passedAll := map[string]string{nexov1alpha1.ConditionValidated: "ok", nexov1alpha1.ConditionReferencesResolved: "ok", nexov1alpha1.ConditionLicensed: "ok", nexov1alpha1.ConditionWorkloadAvailable: ""}
	checked := map[string]string{nexov1alpha1.ConditionValidated: "ok", nexov1alpha1.ConditionReferencesResolved: "ok", nexov1alpha1.ConditionLicensed: "ok"}
	for _, tc := range []struct {
		name      string
		running   string // the proxy's graph revision before the pass ("" none)
		scope     proxyScope
		phase     nexov1alpha1.ProxyPhase
		reason    string // Ready's reason
		workload  metav1.ConditionStatus
		revision  string // status.graphRevision after
		available string // status.availableRevision after
	}{
		{name: "all available", scope: proxyScope{passed: passedAll, revision: "r1", applied: dep(1, 1, 2, 2, false)},
			phase: nexov1alpha1.ProxyReady, reason: nexov1alpha1.ReasonAvailable, workload: metav1.ConditionTrue, revision: "r1", available: "r1"},
		{name: "rolling", running: "r0", scope: proxyScope{passed: passedAll, revision: "r1", applied: dep(2, 2, 1, 1, false)},
			phase: nexov1alpha1.ProxyProgressing, reason: nexov1alpha1.ReasonProgressing, workload: metav1.ConditionFalse, revision: "r1", available: "r0"},
		{name: "the Deployment controller has not seen the new generation", running: "r0", scope: proxyScope{passed: passedAll, revision: "r1", applied: dep(3, 2, 2, 2, false)},
			phase: nexov1alpha1.ProxyProgressing, reason: nexov1alpha1.ReasonProgressing, workload: metav1.ConditionFalse, revision: "r1", available: "r0"},
		{name: "stalled", running: "r0", scope: proxyScope{passed: passedAll, revision: "r1", applied: dep(2, 2, 1, 1, true)},
			phase: nexov1alpha1.ProxyDegraded, reason: nexov1alpha1.ReasonRolloutStalled, workload: metav1.ConditionFalse, revision: "r1", available: "r0"},
		{name: "blocked waiting, nothing running", scope: proxyScope{passed: map[string]string{nexov1alpha1.ConditionValidated: "ok"},
			blockedAt: nexov1alpha1.ConditionReferencesResolved, blocked: &blocked{reason: nexov1alpha1.ReasonReferenceNotFound, message: "x", wait: true}},
			phase: nexov1alpha1.ProxyPending, reason: nexov1alpha1.ReasonReferenceNotFound, workload: metav1.ConditionUnknown},
		{name: "blocked for good, nothing running", scope: proxyScope{blockedAt: nexov1alpha1.ConditionValidated, blocked: &blocked{reason: nexov1alpha1.ReasonSignatureMismatch, message: "x"}},
			phase: nexov1alpha1.ProxyFailed, reason: nexov1alpha1.ReasonSignatureMismatch, workload: metav1.ConditionUnknown},
		{name: "blocked with a running workload", running: "r0", scope: proxyScope{passed: map[string]string{nexov1alpha1.ConditionValidated: "ok", nexov1alpha1.ConditionReferencesResolved: "ok"},
			blockedAt: nexov1alpha1.ConditionLicensed, blocked: &blocked{reason: nexov1alpha1.ReasonLicenseExpired, message: "x"}, running: dep(1, 1, 2, 2, false)},
			phase: nexov1alpha1.ProxyDegraded, reason: nexov1alpha1.ReasonLicenseExpired, workload: metav1.ConditionTrue, revision: "r0", available: "r0"},
		{name: "conflict on a new revision", running: "r0", scope: proxyScope{passed: map[string]string{nexov1alpha1.ConditionValidated: "ok", nexov1alpha1.ConditionReferencesResolved: "ok", nexov1alpha1.ConditionLicensed: "ok"},
			blockedAt: nexov1alpha1.ConditionWorkloadAvailable, blocked: &blocked{reason: nexov1alpha1.ReasonConflict, message: "x"}, running: dep(1, 1, 2, 2, false)},
			phase: nexov1alpha1.ProxyDegraded, reason: nexov1alpha1.ReasonConflict, workload: metav1.ConditionFalse, revision: "r0", available: "r0"},
		{name: "apply failed with a running revision", running: "r0", scope: proxyScope{passed: checked, applyErr: &applyError{verb: "update", kind: "Service", name: "p", err: context.DeadlineExceeded}},
			phase: nexov1alpha1.ProxyDegraded, reason: nexov1alpha1.ReasonApplyFailed, workload: metav1.ConditionFalse, revision: "r0", available: "r0"},
		{name: "apply failed on the first revision", scope: proxyScope{passed: checked, applyErr: &applyError{verb: "create", kind: "Service", name: "p", err: context.DeadlineExceeded}},
			phase: nexov1alpha1.ProxyFailed, reason: nexov1alpha1.ReasonApplyFailed, workload: metav1.ConditionFalse},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &nexov1alpha1.NexoProxy{}
			p.Generation = 1
			p.Status.GraphRevision, p.Status.AvailableRevision = tc.running, tc.running
			s := tc.scope
			s.proxy = p
			proxyStatus(&s)
			ready := findCondition(p, nexov1alpha1.ConditionReady)
			wa := findCondition(p, nexov1alpha1.ConditionWorkloadAvailable)
			if p.Status.Phase != tc.phase || ready == nil || ready.Reason != tc.reason || wa == nil || wa.Status != tc.workload {
				t.Fatalf("phase %s, Ready %+v, WorkloadAvailable %+v", p.Status.Phase, ready, wa)
			}
			if p.Status.GraphRevision != tc.revision || p.Status.AvailableRevision != tc.available {
				t.Errorf("revisions %q/%q, want %q/%q", p.Status.GraphRevision, p.Status.AvailableRevision, tc.revision, tc.available)
			}
			// Every phase condition is present; the ones after a blocked phase are Unknown.
			for i, cond := range nexov1alpha1.ProxyPhases {
				c := findCondition(p, cond)
				if c == nil {
					t.Fatalf("no %s condition", cond)
				}
				if s.blocked != nil && i > slices.Index(nexov1alpha1.ProxyPhases, s.blockedAt) && cond != nexov1alpha1.ConditionWorkloadAvailable && c.Status != metav1.ConditionUnknown {
					t.Errorf("%s after the blocked %s is %s", cond, s.blockedAt, c.Status)
				}
			}
			if tc.running != "" && s.blocked != nil && !strings.Contains(ready.Message, "keeps running graph revision "+tc.running) {
				t.Errorf("Ready does not say the workload keeps %s: %s", tc.running, ready.Message)
			}
		})
	}
}

func TestWorkloadOf(t *testing.T) {
	for _, tc := range []struct {
		name               string
		counts             slimcache.ReplicaCounts
		available, stalled bool
	}{
		{"all ready and updated", slimcache.ReplicaCounts{ObservedGeneration: 2, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2, Available: 2}, true, false},
		{"old generation observed", slimcache.ReplicaCounts{ObservedGeneration: 1, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 2, Available: 2}, false, false},
		{"a surge pod left", slimcache.ReplicaCounts{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 2, ReadyReplicas: 2, Available: 2}, false, false},
		{"one not updated", slimcache.ReplicaCounts{ObservedGeneration: 2, Replicas: 2, UpdatedReplicas: 1, ReadyReplicas: 2, Available: 2}, false, false},
		{"stalled", slimcache.ReplicaCounts{ObservedGeneration: 2, Replicas: 2, UpdatedReplicas: 1, ReadyReplicas: 1, Available: 1, Stalled: true}, false, true},
		{"stalled on an old generation is not reported", slimcache.ReplicaCounts{ObservedGeneration: 1, Stalled: true}, false, false},
	} {
		d := &slimcache.DeploymentState{Replicas: 2, Status: tc.counts}
		d.Generation = 2
		if w := workloadOf(d); w.available != tc.available || w.stalled != tc.stalled {
			t.Errorf("%s: %+v", tc.name, w)
		}
	}
}

func TestDeploymentInSync(t *testing.T) {
	base := func() *appsv1.Deployment {
		replicas := int32(2)
		d := &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Replicas: &replicas, Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{"nexo.io/config-hash": "a"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "ingress", Image: "i:1", Ports: []corev1.ContainerPort{{ContainerPort: 27017}}}},
				Volumes: []corev1.Volume{{Name: "config"}}}}}}
		d.Labels = map[string]string{"app.kubernetes.io/name": "nexo-proxy"}
		return d
	}
	for _, tc := range []struct {
		name   string
		change func(existing *appsv1.Deployment)
		want   bool
	}{
		{"identical", func(*appsv1.Deployment) {}, true},
		{"defaults the API server adds", func(e *appsv1.Deployment) {
			e.Spec.Template.Spec.RestartPolicy = corev1.RestartPolicyAlways
			e.Spec.Template.Spec.Containers[0].TerminationMessagePath = "/dev/termination-log"
		}, true},
		{"extra labels someone added", func(e *appsv1.Deployment) { e.Labels["team"] = "x" }, true},
		{"our label changed", func(e *appsv1.Deployment) { e.Labels["app.kubernetes.io/name"] = "x" }, false},
		{"image edited", func(e *appsv1.Deployment) { e.Spec.Template.Spec.Containers[0].Image = "i:2" }, false},
		{"replicas edited", func(e *appsv1.Deployment) { r := int32(5); e.Spec.Replicas = &r }, false},
		{"a container added", func(e *appsv1.Deployment) {
			e.Spec.Template.Spec.Containers = append(e.Spec.Template.Spec.Containers, corev1.Container{Name: "x"})
		}, false},
		{"a volume added", func(e *appsv1.Deployment) {
			e.Spec.Template.Spec.Volumes = append(e.Spec.Template.Spec.Volumes, corev1.Volume{Name: "x"})
		}, false},
		{"a port added", func(e *appsv1.Deployment) {
			e.Spec.Template.Spec.Containers[0].Ports = append(e.Spec.Template.Spec.Containers[0].Ports, corev1.ContainerPort{ContainerPort: 1})
		}, false},
		{"a pod annotation added", func(e *appsv1.Deployment) { e.Spec.Template.Annotations["x"] = "y" }, false},
		{"config hash changed", func(e *appsv1.Deployment) { e.Spec.Template.Annotations["nexo.io/config-hash"] = "b" }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			existing := base()
			tc.change(existing)
			if got := render.DeploymentChild.InSync(base(), existing); got != tc.want {
				t.Errorf("in sync %v, want %v", got, tc.want)
			}
		})
	}
}

func TestServiceInSync(t *testing.T) {
	svc := func(typ corev1.ServiceType, nodePort int32) *corev1.Service {
		s := &corev1.Service{Spec: corev1.ServiceSpec{Type: typ, Selector: map[string]string{"app": "p"},
			Ports: []corev1.ServicePort{{Name: "mongodb", Port: 27017, TargetPort: intstr.FromInt32(27017), NodePort: nodePort}}}}
		s.Labels = map[string]string{"app.kubernetes.io/name": "nexo-proxy"}
		return s
	}
	allocated := func(typ corev1.ServiceType, nodePort int32) *corev1.Service {
		s := svc(typ, nodePort)
		s.Spec.ClusterIP, s.Spec.Ports[0].Protocol = "10.0.0.1", corev1.ProtocolTCP
		return s
	}
	for _, tc := range []struct {
		name              string
		desired, existing *corev1.Service
		want              bool
	}{
		{"same, with allocated fields", svc(corev1.ServiceTypeClusterIP, 0), allocated(corev1.ServiceTypeClusterIP, 0), true},
		{"node port allocated by the API server", svc(corev1.ServiceTypeNodePort, 0), allocated(corev1.ServiceTypeNodePort, 31000), true},
		{"pinned node port differs", svc(corev1.ServiceTypeNodePort, 30001), allocated(corev1.ServiceTypeNodePort, 31000), false},
		{"type changed", svc(corev1.ServiceTypeClusterIP, 0), allocated(corev1.ServiceTypeNodePort, 31000), false},
		{"selector edited", svc(corev1.ServiceTypeClusterIP, 0), func() *corev1.Service {
			s := allocated(corev1.ServiceTypeClusterIP, 0)
			s.Spec.Selector = map[string]string{"app": "other"}
			return s
		}(), false},
		{"a port added", svc(corev1.ServiceTypeClusterIP, 0), func() *corev1.Service {
			s := allocated(corev1.ServiceTypeClusterIP, 0)
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "x", Port: 1})
			return s
		}(), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := render.ServiceChild.InSync(tc.desired, tc.existing); got != tc.want {
				t.Fatalf("in sync %v, want %v", got, tc.want)
			}
			if !tc.want {
				// Correct brings it back in sync and keeps what the API server allocated.
				e := tc.existing.DeepCopy()
				render.ServiceChild.Correct(tc.desired, e)
				if !render.ServiceChild.InSync(tc.desired, e) || e.Spec.ClusterIP != "10.0.0.1" {
					t.Errorf("after Correct: in sync %v, clusterIP %q", render.ServiceChild.InSync(tc.desired, e), e.Spec.ClusterIP)
				}
			}
		})
	}
}

func TestPredicates(t *testing.T) {
	child := func(rv string, gen int64, owner string) *slimcache.ChildMeta {
		return &slimcache.ChildMeta{Name: "p", Namespace: "n", ResourceVersion: rv, Generation: gen, Owner: slimcache.NewControllerRef("", "NexoProxy", owner, "")}
	}
	dep := func(rv string, gen int64, labels uint64, ready int32) *slimcache.DeploymentState {
		return &slimcache.DeploymentState{ChildMeta: *child(rv, gen, "p"), LabelsHash: labels, Replicas: 1, Status: slimcache.ReplicaCounts{ObservedGeneration: gen, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: ready, Available: ready}}
	}
	ready := func(gen int64, status metav1.ConditionStatus, reason string) *nexov1alpha1.NexoRateLimit {
		o := &nexov1alpha1.NexoRateLimit{}
		o.Generation = gen
		o.Status.Conditions = []metav1.Condition{{Type: nexov1alpha1.ConditionReady, Status: status, Reason: reason, ObservedGeneration: gen}}
		return o
	}
	withAnnotations := func(o *nexov1alpha1.NexoRateLimit, a map[string]string) *nexov1alpha1.NexoRateLimit {
		o.Annotations = a
		return o
	}
	upd := func(a, b client.Object) event.UpdateEvent { return event.UpdateEvent{ObjectOld: a, ObjectNew: b} }
	for _, tc := range []struct {
		name string
		pass func(event.UpdateEvent) bool
		e    event.UpdateEvent
		want bool
	}{
		{"child: a new resourceVersion may be drift", childChanged().Update, upd(child("1", 0, "p"), child("2", 0, "p")), true},
		{"child: a resync", childChanged().Update, upd(child("1", 0, "p"), child("1", 0, "p")), false},
		{"deployment: status churn that changes nothing reported", deploymentChanged().Update, upd(dep("1", 1, 7, 1), dep("2", 1, 7, 1)), false},
		{"deployment: a replica became ready", deploymentChanged().Update, upd(dep("1", 1, 7, 0), dep("2", 1, 7, 1)), true},
		{"deployment: a new generation", deploymentChanged().Update, upd(dep("1", 1, 7, 1), dep("2", 2, 7, 1)), true},
		{"deployment: labels edited", deploymentChanged().Update, upd(dep("1", 1, 7, 1), dep("2", 1, 8, 1)), true},
		{"component: status churn without a Ready change", readinessChanged().Update, upd(ready(1, "True", "Valid"), ready(1, "True", "Valid")), false},
		{"component: Ready changed", readinessChanged().Update, upd(ready(1, "True", "Valid"), ready(1, "False", "InvalidSpec")), true},
		{"component: a new generation", readinessChanged().Update, upd(ready(1, "True", "Valid"), ready(2, "True", "Valid")), true},
		{"own kind: status only", specOrSignatureChanged().Update, upd(ready(1, "True", "Valid"), ready(1, "False", "X")), false},
		{"own kind: a spec change", specOrSignatureChanged().Update, upd(ready(1, "True", "Valid"), ready(2, "True", "Valid")), true},
		{"own kind: re-signed (annotations only)", specOrSignatureChanged().Update,
			upd(withAnnotations(ready(1, "True", "Valid"), map[string]string{"nexo.io/signature": "a"}), withAnnotations(ready(1, "True", "Valid"), map[string]string{"nexo.io/signature": "b"})), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.pass(tc.e); got != tc.want {
				t.Errorf("passes %v, want %v", got, tc.want)
			}
		})
	}
	if childChanged().Create(event.CreateEvent{Object: child("1", 0, "p")}) || deploymentChanged().Create(event.CreateEvent{Object: dep("1", 1, 7, 1)}) {
		t.Error("the creation of a child the operator just made re-queues its proxy")
	}
}

// The license reasons, from the document in the Secret to the Ready condition.
func TestLicenseReasons(t *testing.T) {
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	_, other, _ := ed25519.GenerateKey(rand.Reader)
	now := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	issue := func(key ed25519.PrivateKey, licensee string, expires time.Time) string {
		doc, err := license.Issue(license.Claims{Licensee: licensee, ExpiresAt: expires, Entitlements: []string{"NexoRouter"}, MaxProxies: 3}, key)
		if err != nil {
			t.Fatal(err)
		}
		return doc
	}
	good := issue(priv, "acme", now.Add(90*24*time.Hour))
	for _, tc := range []struct {
		name      string
		data      map[string][]byte // nil: no Secret
		expected  string
		renew     string
		reason    string
		readyTrue bool
	}{
		{name: "no Secret", reason: nexov1alpha1.ReasonSecretNotFound},
		{name: "no key", data: map[string][]byte{"other": []byte(good)}, reason: nexov1alpha1.ReasonSecretKeyMissing},
		{name: "not a license", data: map[string][]byte{"license": []byte("hello")}, reason: nexov1alpha1.ReasonLicenseMalformed},
		{name: "unknown key", data: map[string][]byte{"license": []byte(issue(other, "acme", now.Add(time.Hour)))}, reason: nexov1alpha1.ReasonLicenseUnknownKey},
		{name: "tampered", data: map[string][]byte{"license": []byte(good[:len(good)-4] + "AAAA")}, reason: nexov1alpha1.ReasonLicenseBadSig},
		{name: "another licensee", data: map[string][]byte{"license": []byte(good)}, expected: "globex", reason: nexov1alpha1.ReasonLicenseeMismatch},
		{name: "expired", data: map[string][]byte{"license": []byte(issue(priv, "acme", now.Add(-time.Hour)))}, reason: nexov1alpha1.ReasonLicenseExpired},
		{name: "expiring", data: map[string][]byte{"license": []byte(good)}, renew: "2400h", reason: nexov1alpha1.ReasonLicenseExpiring, readyTrue: true},
		{name: "valid", data: map[string][]byte{"license": []byte(good)}, renew: "720h", reason: nexov1alpha1.ReasonLicenseValid, readyTrue: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := fake.NewClientBuilder().WithScheme(scheme.New())
			if tc.data != nil {
				b = b.WithObjects(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "lic", Namespace: "shop"}, Data: tc.data})
			}
			r := &LicenseReconciler{APIReader: b.Build(), LicenseKeys: map[string]ed25519.PublicKey{signature.KeyID(priv.Public().(ed25519.PublicKey)): priv.Public().(ed25519.PublicKey)},
				Keys: &TrustedKeys{}, Now: func() time.Time { return now }}
			lic := &nexov1alpha1.NexoLicense{ObjectMeta: metav1.ObjectMeta{Name: "l", Namespace: "shop"},
				Spec: nexov1alpha1.NexoLicenseSpec{SecretRef: nexov1alpha1.SecretKeyReference{Name: "lic", Key: "license"}, ExpectedLicensee: tc.expected, RenewBefore: nexov1alpha1.Duration(tc.renew)}}
			if _, err := r.evaluate(context.Background(), lic); err != nil {
				t.Fatal(err)
			}
			c := findCondition(lic, nexov1alpha1.ConditionReady)
			if c == nil || c.Reason != tc.reason || (c.Status == metav1.ConditionTrue) != tc.readyTrue {
				t.Fatalf("Ready %+v, want %s (true: %v)", c, tc.reason, tc.readyTrue)
			}
			if strings.Contains(c.Message, good) {
				t.Error("the message repeats the license document")
			}
			if !tc.readyTrue && tc.reason != nexov1alpha1.ReasonLicenseExpired && (lic.Status.Licensee != "" || lic.Status.MaxProxies != 0) {
				t.Errorf("a refused license keeps claims in status: %+v", lic.Status)
			}
		})
	}
}

func findCondition(obj nexov1alpha1.Object, t string) *metav1.Condition {
	for i, c := range obj.NexoStatus().Conditions {
		if c.Type == t {
			return &obj.NexoStatus().Conditions[i]
		}
	}
	return nil
}
