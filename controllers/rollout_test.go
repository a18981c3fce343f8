package controllers_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/contract/wire"
	"github.com/nexo-io/nexo-edge/controllers/render"
	"github.com/nexo-io/nexo-edge/test/framework/testcluster"
)

// configOf lists the config ConfigMaps a pod template names.
func configOf(spec corev1.PodSpec) []string {
	var out []string
	for _, v := range spec.Volumes {
		if v.Projected != nil {
			for _, s := range v.Projected.Sources {
				if s.ConfigMap != nil {
					out = append(out, s.ConfigMap.Name)
				}
			}
		}
	}
	return out
}

func configMapOf(t *testing.T, ns, name string) (*corev1.ConfigMap, bool) {
	t.Helper()
	cm := &corev1.ConfigMap{}
	err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, cm)
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return cm, true
}

func editRateLimit(t *testing.T, ns string, ops int32) {
	t.Helper()
	ctx := context.Background()
	rl := &nexov1alpha1.NexoRateLimit{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "per-client"}, rl); err != nil {
		t.Fatal(err)
	}
	rl.Spec.OperationsPerSecond = ops
	if err := k8s.Update(ctx, rl); err != nil {
		t.Fatal(err)
	}
}

// TestConfigPerRevision: each graph revision's config is its own immutable pair of ConfigMaps;
// while a new revision rolls out, the old ReplicaSet's pods keep naming the old, unchanged
// config; the previous revision's config is kept, and going back to that revision reuses it;
// `kubectl rollout undo` is reverted by the operator; older config goes once a rollout completes;
// each rollout is one Event.
func TestConfigPerRevision(t *testing.T) {
	ns := "revisions"
	ctx := context.Background()
	applyGraph(t, ns, validLicense(t), nil)
	p1 := waitProxy(t, ns, 2*time.Minute, "Ready", isReady)
	rev1 := p1.Status.GraphRevision
	if p1.Status.AvailableRevision != rev1 {
		t.Errorf("availableRevision %q, want %q", p1.Status.AvailableRevision, rev1)
	}
	old, ok := configMapOf(t, ns, render.RoutingName(proxyName, rev1))
	if !ok || old.Immutable == nil || !*old.Immutable {
		t.Fatalf("revision %s has no immutable routing ConfigMap", rev1)
	}

	editRateLimit(t, ns, 601)
	// The new revision is applied: the Deployment names its config, and the old ReplicaSet
	// (the one the old pods belong to) still names the old config, which did not change.
	var rev2 string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		d := deployment(t, ns)
		rev2 = d.Spec.Template.Annotations[render.GraphRevisionKey]
		return rev2 != rev1, nil
	})
	if err != nil {
		t.Fatal("no new revision applied")
	}
	if got := strings.Join(configOf(deployment(t, ns).Spec.Template.Spec), ","); got != render.RoutingName(proxyName, rev2)+","+render.StepsName(proxyName, rev2) {
		t.Errorf("the new pod template names %s", got)
	}
	var rss appsv1.ReplicaSetList
	if err := k8s.List(ctx, &rss, client.InNamespace(ns), client.MatchingLabels{wire.ProxyLabel: proxyName}); err != nil {
		t.Fatal(err)
	}
	sawOld := false
	for _, rs := range rss.Items {
		if rs.Spec.Template.Annotations[render.GraphRevisionKey] == rev1 {
			sawOld = true
			if got := strings.Join(configOf(rs.Spec.Template.Spec), ","); got != render.RoutingName(proxyName, rev1)+","+render.StepsName(proxyName, rev1) {
				t.Errorf("the old ReplicaSet names %s", got)
			}
		}
	}
	if !sawOld {
		t.Error("no ReplicaSet of the old revision")
	}
	if now, ok := configMapOf(t, ns, render.RoutingName(proxyName, rev1)); !ok || now.ResourceVersion != old.ResourceVersion {
		t.Error("the old revision's config changed or went while its pods could still run")
	}
	p2 := waitProxy(t, ns, 2*time.Minute, "Ready on the new revision", func(p *nexov1alpha1.NexoProxy) bool {
		return isReady(p) && p.Status.AvailableRevision == rev2
	})
	if p2.Status.GraphRevision != rev2 || p2.Status.PreviousRevision != rev1 {
		t.Errorf("status revisions: desired %s available %s previous %s", p2.Status.GraphRevision, p2.Status.AvailableRevision, p2.Status.PreviousRevision)
	}
	if _, ok := configMapOf(t, ns, render.StepsName(proxyName, rev1)); !ok {
		t.Error("the previous revision's config was removed")
	}

	// A third revision: once it is rolled out, the first revision's config goes, the second's stays.
	editRateLimit(t, ns, 602)
	p3 := waitProxy(t, ns, 2*time.Minute, "Ready on a third revision", func(p *nexov1alpha1.NexoProxy) bool {
		return isReady(p) && p.Status.AvailableRevision != rev2 && p.Status.AvailableRevision == p.Status.GraphRevision
	})
	rev3 := p3.Status.GraphRevision
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, first := configMapOf(t, ns, render.RoutingName(proxyName, rev1))
		_, second := configMapOf(t, ns, render.RoutingName(proxyName, rev2))
		_, third := configMapOf(t, ns, render.RoutingName(proxyName, rev3))
		return !first && second && third, nil
	})
	if err != nil {
		t.Errorf("after the third rollout: want only revisions %s and %s kept", rev2, rev3)
	}

	// kubectl rollout undo does not roll a proxy back: the operator owns the Deployment and puts
	// the desired revision back (docs/operator.md, "Going back"). The undone template names
	// config that still exists meanwhile, so the pods it starts can run.
	kubectl := filepath.Join(testcluster.BinDir(), "kubectl")
	if out, err := exec.Command(kubectl, "--kubeconfig", cluster.Kubeconfig, "-n", ns, "rollout", "undo", "deployment/"+proxyName).CombinedOutput(); err != nil {
		t.Fatalf("kubectl rollout undo: %v\n%s", err, out)
	}
	for _, name := range configOf(deployment(t, ns).Spec.Template.Spec) {
		if _, ok := configMapOf(t, ns, name); !ok {
			t.Errorf("after rollout undo the pod template names %s, which does not exist", name)
		}
	}
	var undone string
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		d := deployment(t, ns)
		undone = d.Spec.Template.Annotations[render.GraphRevisionKey]
		return undone == rev3 && strings.Join(configOf(d.Spec.Template.Spec), ",") == render.RoutingName(proxyName, rev3)+","+render.StepsName(proxyName, rev3), nil
	})
	if err != nil {
		t.Errorf("after kubectl rollout undo the Deployment stays on revision %s; the operator should put the desired %s back", undone, rev3)
	}
	if p := waitProxy(t, ns, time.Minute, "Ready on the desired revision after the undo", func(p *nexov1alpha1.NexoProxy) bool {
		return isReady(p) && p.Status.GraphRevision == rev3 && p.Status.AvailableRevision == rev3
	}); p.Status.PreviousRevision != rev2 {
		t.Errorf("after the undo was reverted, previousRevision %s, want %s", p.Status.PreviousRevision, rev2)
	}
	// One RolloutStarted Event per revision, however many passes ran.
	var evs eventsv1.EventList
	if err := k8s.List(ctx, &evs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	started := map[string]int{}
	for _, e := range evs.Items {
		if e.Regarding.Kind == "NexoProxy" && e.Reason == nexov1alpha1.EventRolloutStarted {
			started[e.Note]++
		}
	}
	for _, rev := range []string{rev2, rev3} {
		n := 0
		for note, c := range started {
			if strings.Contains(note, "revision "+rev) {
				n += c
			}
		}
		if n != 1 {
			t.Errorf("%d RolloutStarted Events for revision %s, want 1 (all: %v)", n, rev, started)
		}
	}

	// Going back is a change of the Nexo objects: the revision they make again reuses the
	// config kept for it.
	before, _ := configMapOf(t, ns, render.RoutingName(proxyName, rev2))
	editRateLimit(t, ns, 601)
	waitProxy(t, ns, 2*time.Minute, "Ready on the second revision again", func(p *nexov1alpha1.NexoProxy) bool {
		return isReady(p) && p.Status.GraphRevision == rev2 && p.Status.AvailableRevision == rev2
	})
	if again, ok := configMapOf(t, ns, render.RoutingName(proxyName, rev2)); !ok || again.UID != before.UID {
		t.Errorf("going back to revision %s made its config again instead of reusing the one kept", rev2)
	}
}

// TestConflictOnANewRevisionChangesNothing: a name clash met while applying a new revision
// leaves the running workload, its config and status exactly as they were.
func TestConflictOnANewRevisionChangesNothing(t *testing.T) {
	ns := "conflict-rev"
	ctx := context.Background()
	applyGraph(t, ns, validLicense(t), nil)
	before := waitProxy(t, ns, 2*time.Minute, "Ready", isReady)
	depBefore := deployment(t, ns)

	// A second shareable registry credential, and someone else's Secret where its copy would go.
	second := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "second-registry", Namespace: operatorNamespace, Labels: map[string]string{wire.RegistryCredentialLabel: "true"}},
		Type: corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{}}`)}}
	foreign := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: render.PullSecretName(proxyName, "second-registry"), Namespace: ns}, Data: map[string][]byte{"theirs": []byte("x")}}
	for _, o := range []client.Object{second, foreign} {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	profile := &nexov1alpha1.NexoDeploymentProfile{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: before.Spec.ProfileRef.Name}, profile); err != nil {
		t.Fatal(err)
	}
	profile.Spec.ImagePullSecrets = append(profile.Spec.ImagePullSecrets, nexov1alpha1.SecretReference{Name: "second-registry"})
	if err := k8s.Update(ctx, profile); err != nil {
		t.Fatal(err)
	}
	p := waitProxy(t, ns, time.Minute, "Conflict", hasReason(nexov1alpha1.ReasonConflict))
	if p.Status.Phase != nexov1alpha1.ProxyDegraded || p.Status.GraphRevision != before.Status.GraphRevision || p.Status.AvailableRevision != before.Status.AvailableRevision {
		t.Errorf("status after the conflict: phase %s, revisions %s/%s (was %s)", p.Status.Phase, p.Status.GraphRevision, p.Status.AvailableRevision, before.Status.GraphRevision)
	}
	// Give the operator time to do something wrong, then compare.
	time.Sleep(2 * time.Second)
	if d := deployment(t, ns); d.Generation != depBefore.Generation || d.Spec.Template.Annotations[render.GraphRevisionKey] != before.Status.GraphRevision {
		t.Errorf("the Deployment moved: generation %d → %d, revision %s", depBefore.Generation, d.Generation, d.Spec.Template.Annotations[render.GraphRevisionKey])
	}
	var cms corev1.ConfigMapList
	if err := k8s.List(ctx, &cms, client.InNamespace(ns), client.MatchingLabels{wire.ProxyLabel: proxyName}); err != nil {
		t.Fatal(err)
	}
	for _, cm := range cms.Items {
		if rev := render.ConfigRevision(proxyName, cm.Name); rev != before.Status.GraphRevision {
			t.Errorf("config of revision %s was left behind by the refused pass", rev)
		}
	}
	got := &corev1.Secret{}
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(foreign), got); err != nil || got.ResourceVersion != foreign.ResourceVersion {
		t.Errorf("the foreign Secret changed (%v)", err)
	}
}

// TestStalledRolloutIsReported: a revision whose pods can never be scheduled stalls its rollout
// (ProgressDeadlineExceeded): the proxy is Degraded with RolloutStalled naming the revision, while
// the old pods keep serving the available one.
func TestStalledRolloutIsReported(t *testing.T) {
	ns := "stalled"
	ctx := context.Background()
	applyGraph(t, ns, validLicense(t), func(kind string, u *unstructured.Unstructured) bool {
		if kind == "NexoDeploymentProfile" {
			_ = unstructured.SetNestedField(u.Object, int64(5), "spec", "progressDeadlineSeconds")
		}
		return true
	})
	before := waitProxy(t, ns, 2*time.Minute, "Ready", isReady)
	pr := &nexov1alpha1.NexoProxy{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: proxyName}, pr); err != nil {
		t.Fatal(err)
	}
	// More CPU than any node has: the new pods stay Pending.
	pr.Spec.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("5000")}}
	if err := k8s.Update(ctx, pr); err != nil {
		t.Fatal(err)
	}
	p := waitProxy(t, ns, 2*time.Minute, "RolloutStalled", hasReason(nexov1alpha1.ReasonRolloutStalled))
	_, msg := readyReason(p)
	if p.Status.Phase != nexov1alpha1.ProxyDegraded || !strings.Contains(msg, "graph revision "+p.Status.GraphRevision) ||
		p.Status.AvailableRevision != before.Status.GraphRevision || !strings.Contains(msg, "keep serving graph revision "+before.Status.GraphRevision) {
		t.Errorf("stalled: phase %s, revisions %s/%s, message %s", p.Status.Phase, p.Status.GraphRevision, p.Status.AvailableRevision, msg)
	}
	if p.Status.ReadyReplicas < 1 {
		t.Errorf("the old pods stopped serving: %d ready", p.Status.ReadyReplicas)
	}
	var evs eventsv1.EventList
	if err := k8s.List(ctx, &evs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range evs.Items {
		if e.Reason == nexov1alpha1.ReasonRolloutStalled && e.Type == corev1.EventTypeWarning {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d RolloutStalled Events, want 1", n)
	}
}
