package render_test

import (
	"fmt"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/catalog"
	"github.com/nexo-io/nexo-edge/controllers/render"
)

func graph() *render.Graph {
	return &render.Graph{
		Proxy: &nexov1alpha1.NexoProxy{
			ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "shop"},
			Spec: nexov1alpha1.NexoProxySpec{
				Upstream: nexov1alpha1.Target{Name: "primary", Address: "mongo:27017"},
				Port:     27017,
				TLS:      &nexov1alpha1.ProxyTLS{SecretRef: nexov1alpha1.SecretReference{Name: "p-tls"}},
			},
		},
		Pipeline: &nexov1alpha1.NexoPipeline{},
		Steps: []render.Component{
			{Kind: "NexoTenantIsolation", Name: "t", Slot: catalog.SlotRequest, Spec: nexov1alpha1.NexoTenantIsolationSpec{TenantField: "tenantId"}},
			{Kind: "NexoRateLimit", Name: "r", Slot: catalog.SlotRequest, Spec: nexov1alpha1.NexoRateLimitSpec{OperationsPerSecond: 5}},
			{Kind: "NexoPIIMasking", Name: "m", Slot: catalog.SlotResponse, Spec: nexov1alpha1.NexoPIIMaskingSpec{}},
		},
		Profile: &nexov1alpha1.NexoDeploymentProfile{Spec: nexov1alpha1.NexoDeploymentProfileSpec{
			Images: nexov1alpha1.RuntimeImages{Ingress: "r/ingress:1", Egress: "r/egress:1"},
			StepCatalog: []nexov1alpha1.StepImage{
				{Kind: "NexoPIIMasking", Image: "r/pii:1"}, {Kind: "NexoTenantIsolation", Image: "r/tenant:1"},
			},
			ImagePullSecrets:    []nexov1alpha1.SecretReference{{Name: "registry"}},
			DrainTimeoutSeconds: 45,
			Defaults:            nexov1alpha1.ProfileDefaults{Replicas: 3},
		}},
	}
}

func TestDeployment(t *testing.T) {
	g := graph()
	d := render.Deployment(g, "cafe", "rev1")
	var names []string
	for _, c := range d.Spec.Template.Spec.Containers {
		names = append(names, c.Name)
		sc := c.SecurityContext
		if sc == nil || !*sc.RunAsNonRoot || !*sc.ReadOnlyRootFilesystem || *sc.AllowPrivilegeEscalation ||
			len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL" || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("container %s is not restricted: %+v", c.Name, sc)
		}
		if sc.RunAsUser != nil {
			t.Errorf("container %s fixes runAsUser", c.Name)
		}
	}
	// one container per step kind with a catalog image, in pipeline order; NexoRateLimit has none
	want := []string{"ingress", "egress", "step-tenantisolation", "step-piimasking"}
	if len(names) != len(want) {
		t.Fatalf("containers %v, want %v", names, want)
	}
	for i := range want {
		if names[i] != want[i] {
			t.Fatalf("containers %v, want %v", names, want)
		}
	}
	if *d.Spec.Replicas != 3 {
		t.Errorf("replicas %d, want profile default 3", *d.Spec.Replicas)
	}
	ru := d.Spec.Strategy.RollingUpdate
	if ru.MaxUnavailable.IntValue() != 0 || ru.MaxSurge.IntValue() != 1 {
		t.Errorf("rolling update %v/%v, want 0/1", ru.MaxUnavailable, ru.MaxSurge)
	}
	if grace := *d.Spec.Template.Spec.TerminationGracePeriodSeconds; grace <= 45 {
		t.Errorf("grace period %d not above drain timeout 45", grace)
	}
	if d.Spec.Template.Annotations[render.ConfigHashKey] != "cafe" || d.Spec.Template.Annotations[render.GraphRevisionKey] != "rev1" {
		t.Errorf("pod template annotations %v", d.Spec.Template.Annotations)
	}
	if ps := d.Spec.Template.Spec.ImagePullSecrets; len(ps) != 1 || ps[0].Name != "p-pull-registry" {
		t.Errorf("pull secrets %v", ps)
	}
	tlsMounted := false
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Secret != nil && v.Secret.SecretName == "p-tls" {
			tlsMounted = true
		}
	}
	if !tlsMounted {
		t.Error("TLS secret not mounted")
	}
	// The pod template names the revision's own config, and keeps one old ReplicaSet, whose
	// config the operator keeps too.
	var config []string
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Projected != nil {
			for _, src := range v.Projected.Sources {
				config = append(config, src.ConfigMap.Name)
			}
		}
	}
	if strings.Join(config, ",") != "p-routing-rev1,p-steps-rev1" {
		t.Errorf("config volumes %v, want the rev1 ConfigMaps", config)
	}
	if *d.Spec.RevisionHistoryLimit != render.RevisionHistoryLimit || *d.Spec.ProgressDeadlineSeconds != 600 {
		t.Errorf("revisionHistoryLimit %d, progressDeadlineSeconds %d", *d.Spec.RevisionHistoryLimit, *d.Spec.ProgressDeadlineSeconds)
	}
	g.Proxy.Spec.Replicas = ptr.To[int32](1)
	if got := *render.Deployment(g, "cafe", "rev1").Spec.Replicas; got != 1 {
		t.Errorf("proxy replicas not honoured: %d", got)
	}
}

// Each revision's config is an immutable pair of ConfigMaps whose names carry the revision.
func TestConfigMapsPerRevision(t *testing.T) {
	g := graph()
	cms := render.ConfigMaps(g, "abc123")
	if len(cms) != 2 || cms[0].Name != "p-routing-abc123" || cms[1].Name != "p-steps-abc123" {
		t.Fatalf("config maps %v", cms)
	}
	for _, cm := range cms {
		if cm.Immutable == nil || !*cm.Immutable {
			t.Errorf("%s is not immutable", cm.Name)
		}
		if got := render.ConfigRevision("p", cm.Name); got != "abc123" {
			t.Errorf("ConfigRevision(%s) = %q", cm.Name, got)
		}
	}
	for name, want := range map[string]string{"p-routing": "", "p-steps": "", "p-routing-routing-x": "", "q-routing-abc": "", "p-tls": ""} {
		if got := render.ConfigRevision("p", name); got != want {
			t.Errorf("ConfigRevision(p, %s) = %q, want %q", name, got, want)
		}
	}
}

func TestService(t *testing.T) {
	g := graph()
	svc := render.Service(g)
	if svc.Spec.Type != corev1.ServiceTypeClusterIP || len(svc.Spec.Ports) != 1 {
		t.Fatalf("default service %v with %d ports", svc.Spec.Type, len(svc.Spec.Ports))
	}
	g.Proxy.Spec.LocalAccess = &nexov1alpha1.LocalAccess{Enabled: true, NodePort: ptr.To[int32](30017)}
	g.Metrics = &nexov1alpha1.NexoMetricsSpec{Port: 9216}
	svc = render.Service(g)
	if svc.Spec.Type != corev1.ServiceTypeNodePort || svc.Spec.Ports[0].NodePort != 30017 {
		t.Errorf("local access: %v nodePort %d", svc.Spec.Type, svc.Spec.Ports[0].NodePort)
	}
	if len(svc.Spec.Ports) != 2 || svc.Spec.Ports[1].Name != "metrics" || svc.Spec.Ports[1].Port != 9216 {
		t.Errorf("metrics port missing: %v", svc.Spec.Ports)
	}
}

func TestRevisionAndConfigHash(t *testing.T) {
	a, b := graph(), graph()
	b.Proxy.Namespace, b.Proxy.UID = "elsewhere", "other-uid" // another cluster or namespace
	if render.Revision(a) != render.Revision(b) {
		t.Error("identical specs gave different revisions")
	}
	b.Steps[1].Spec = nexov1alpha1.NexoRateLimitSpec{OperationsPerSecond: 6}
	if render.Revision(a) == render.Revision(b) {
		t.Error("a step edit did not change the revision")
	}
	cms := render.ConfigData(a, render.Revision(a))
	h1 := render.ConfigHash(cms, map[string]map[string][]byte{"p-tls": {"tls.crt": []byte("1")}})
	h2 := render.ConfigHash(cms, map[string]map[string][]byte{"p-tls": {"tls.crt": []byte("2")}})
	if h1 == h2 {
		t.Error("a Secret change did not change the config hash")
	}
	if h1 != render.ConfigHash(render.ConfigData(a, render.Revision(a)), map[string]map[string][]byte{"p-tls": {"tls.crt": []byte("1")}}) {
		t.Error("config hash is not deterministic")
	}
}

// ContentHash is what the operator compares a child by when it does not read it: the same
// rendering gives the same hash, and every field the operator sets moves it.
func TestContentHash(t *testing.T) {
	g := graph()
	dep := func() *appsv1.Deployment { return render.Deployment(g, "h", "r") }
	if render.DeploymentChild.ContentHash(dep()) != render.DeploymentChild.ContentHash(dep()) {
		t.Fatal("the same Deployment hashes differently")
	}
	cms := render.ConfigMaps(g, "r")
	src := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "reg", Namespace: "nexo-system"}, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte("{}")}}
	cases := map[string]struct {
		kind render.ChildKind
		obj  client.Object
		edit func(client.Object)
	}{
		"deployment template": {render.DeploymentChild, dep(), func(o client.Object) {
			o.(*appsv1.Deployment).Spec.Template.Annotations[render.ConfigHashKey] = "other"
		}},
		"deployment replicas": {render.DeploymentChild, dep(), func(o client.Object) { o.(*appsv1.Deployment).Spec.Replicas = ptr.To[int32](5) }},
		"deployment labels":   {render.DeploymentChild, dep(), func(o client.Object) { o.GetLabels()["extra"] = "x" }},
		"configmap data":      {render.ConfigMapChild, cms[0], func(o client.Object) { o.(*corev1.ConfigMap).Data["routing.json"] = "{}" }},
		"service ports":       {render.ServiceChild, render.Service(g), func(o client.Object) { o.(*corev1.Service).Spec.Ports[0].Port = 1 }},
		"service type":        {render.ServiceChild, render.Service(g), func(o client.Object) { o.(*corev1.Service).Spec.Type = corev1.ServiceTypeNodePort }},
		"secret data":         {render.SecretChild, render.PullSecret(g, src), func(o client.Object) { o.(*corev1.Secret).Data = map[string][]byte{"k": []byte("v")} }},
		"secret source":       {render.SecretChild, render.PullSecret(g, src), func(o client.Object) { o.GetAnnotations()[render.CopiedFromKey] = "x/y" }},
	}
	for name, c := range cases {
		before := c.kind.ContentHash(c.obj)
		c.edit(c.obj)
		if c.kind.ContentHash(c.obj) == before {
			t.Errorf("%s: the edit does not change the content hash", name)
		}
	}
}

// Every child kind renders objects of its own type, which its New, ContentHash, InSync and
// Correct accept: a table entry whose functions disagree about the type fails here, not in a
// reconcile.
func TestEveryChildKindIsConsistent(t *testing.T) {
	g := graph()
	src := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "reg", Namespace: "nexo-system"}, Type: corev1.SecretTypeDockerConfigJson}
	in := render.Inputs{ConfigHash: "h", Revision: "r", PullSecrets: []*corev1.Secret{src}}
	seen := map[string]bool{}
	for _, k := range render.Children {
		if seen[k.Kind()] || k.Resource == "" || len(k.Verbs) == 0 {
			t.Errorf("%s: duplicate, or no resource or verbs", k.Kind())
		}
		seen[k.Kind()] = true
		objs := k.Render(g, in)
		if len(objs) == 0 {
			t.Errorf("%s renders nothing for a full graph", k.Kind())
		}
		for _, o := range objs {
			if fmt.Sprintf("%T", o) != fmt.Sprintf("%T", k.New()) {
				t.Errorf("%s renders a %T, New returns a %T", k.Kind(), o, k.New())
			}
			existing := o.DeepCopyObject().(client.Object)
			if !k.InSync(o, existing) {
				t.Errorf("%s: a copy of the desired object is not in sync", k.Kind())
			}
			existing.SetLabels(nil)
			k.Correct(o, existing)
			if !k.InSync(o, existing) || k.ContentHash(o) != k.ContentHash(o.DeepCopyObject().(client.Object)) {
				t.Errorf("%s: Correct does not bring a copy back in sync, or the hash is not stable", k.Kind())
			}
		}
	}
}
