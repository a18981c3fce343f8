package controllers_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/controllers/render"
)

// secretMounts lists, per container, the Secrets it mounts and their projected keys.
func secretMounts(spec corev1.PodSpec) map[string]map[string][]string {
	out := map[string]map[string][]string{}
	for _, c := range spec.Containers {
		for _, m := range c.VolumeMounts {
			i := slices.IndexFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == m.Name })
			if i < 0 || spec.Volumes[i].Secret == nil {
				continue
			}
			var keys []string
			for _, it := range spec.Volumes[i].Secret.Items {
				keys = append(keys, it.Key)
			}
			if out[c.Name] == nil {
				out[c.Name] = map[string][]string{}
			}
			out[c.Name][spec.Volumes[i].Secret.SecretName] = keys
		}
	}
	return out
}

// validateConfig validates a rendered config file against one of the runtime contract's JSON
// Schemas.
func validateConfig(t *testing.T, schemaFile, doc string) error {
	t.Helper()
	path, err := filepath.Abs(filepath.Join("..", "docs", "runtime", schemaFile))
	if err != nil {
		t.Fatal(err)
	}
	schema, err := jsonschema.NewCompiler().Compile(path)
	if err != nil {
		t.Fatal(err)
	}
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	return schema.Validate(v)
}

// condition is one of a proxy's conditions, in short.
type condition struct {
	true            bool
	reason, message string
}

func conditionOf(p *nexov1alpha1.NexoProxy, t string) condition {
	if c := meta.FindStatusCondition(p.Status.Conditions, t); c != nil {
		return condition{c.Status == metav1.ConditionTrue, c.Reason, c.Message}
	}
	return condition{}
}

// A NexoAuthPolicy's upstream credentials reach egress and no other container, with only the
// username and password keys; the PII salt reaches the masking step's own container. Rotating a
// credential rolls the pods once; a credential Secret that loses a key the runtime reads blocks
// the proxy (SecretKeyMissing) and leaves the running Deployment as it was.
func TestSecretsReachTheContainerThatReadsThem(t *testing.T) {
	ns := "runtime-secrets"
	ctx := context.Background()
	applyGraph(t, ns, validLicense(t), nil)
	waitProxy(t, ns, 2*time.Minute, "Ready", isReady)

	d := deployment(t, ns)
	mounts := secretMounts(d.Spec.Template.Spec)
	want := map[string]map[string][]string{
		"egress": {
			"orders-upstream-credentials":    {"username", "password"},
			"reporting-upstream-credentials": {"username", "password"},
		},
		"step-piimasking": {"pii-salt": {"salt"}},
	}
	if len(mounts) != len(want) {
		t.Errorf("containers with Secrets: %v, want %v", mounts, want)
	}
	for container, secrets := range want {
		for name, keys := range secrets {
			if got := mounts[container][name]; !slices.Equal(got, keys) {
				t.Errorf("%s mounts %s with keys %v, want %v (all mounts: %v)", container, name, got, keys, mounts)
			}
		}
		if len(mounts[container]) != len(secrets) {
			t.Errorf("%s mounts %v, want only %v", container, mounts[container], secrets)
		}
	}

	// The config the operator wrote follows the published JSON Schemas (docs/runtime).
	for file, cm := range map[string]string{"routing.schema.json": render.RoutingName(proxyName, d.Spec.Template.Annotations[render.GraphRevisionKey]),
		"steps.schema.json": render.StepsName(proxyName, d.Spec.Template.Annotations[render.GraphRevisionKey])} {
		config, ok := configMapOf(t, ns, cm)
		if !ok {
			t.Fatalf("no ConfigMap %s", cm)
		}
		for key, doc := range config.Data {
			if err := validateConfig(t, file, doc); err != nil {
				t.Errorf("%s %s does not follow %s: %v", cm, key, file, err)
			}
		}
	}

	// Rotation: one new pod template, one rollout.
	generation, hash := d.Generation, d.Spec.Template.Annotations[render.ConfigHashKey]
	creds := &corev1.Secret{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "orders-upstream-credentials"}, creds); err != nil {
		t.Fatal(err)
	}
	creds.Data["password"] = []byte("rotated-orders")
	if err := k8s.Update(ctx, creds); err != nil {
		t.Fatal(err)
	}
	p := waitProxy(t, ns, 2*time.Minute, "Ready on the rotated credentials", func(p *nexov1alpha1.NexoProxy) bool {
		return isReady(p) && p.Status.ConfigHash != hash
	})
	quiet := deployment(t, ns)
	time.Sleep(2 * time.Second) // any second write of the template would land in this window
	if after := deployment(t, ns); after.Generation != generation+1 || after.Generation != quiet.Generation ||
		after.Spec.Template.Annotations[render.ConfigHashKey] != p.Status.ConfigHash {
		t.Errorf("the rotation moved the Deployment from generation %d to %d (want one rollout), template hash %s, proxy hash %s",
			generation, after.Generation, after.Spec.Template.Annotations[render.ConfigHashKey], p.Status.ConfigHash)
	}

	// A key the runtime reads goes missing: blocked, named, and nothing rolls.
	generation = deployment(t, ns).Generation
	other := &corev1.Secret{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "reporting-upstream-credentials"}, other); err != nil {
		t.Fatal(err)
	}
	delete(other.Data, "password")
	if err := k8s.Update(ctx, other); err != nil {
		t.Fatal(err)
	}
	p = waitProxy(t, ns, time.Minute, "SecretKeyMissing", func(p *nexov1alpha1.NexoProxy) bool {
		return conditionOf(p, nexov1alpha1.ConditionReferencesResolved).reason == nexov1alpha1.ReasonSecretKeyMissing
	})
	msg := conditionOf(p, nexov1alpha1.ConditionReferencesResolved).message
	for _, s := range []string{"reporting-upstream-credentials", `"password"`, "NexoAuthPolicy app-credentials", "spec.mappings[1].credentialsSecretRef"} {
		if !strings.Contains(msg, s) {
			t.Errorf("the condition %q does not name %s", msg, s)
		}
	}
	if strings.Contains(msg, "s3cret") || strings.Contains(msg, "rotated") {
		t.Errorf("the condition leaks a Secret's content: %q", msg)
	}
	if p.Status.Phase != nexov1alpha1.ProxyDegraded || p.Status.AvailableRevision == "" {
		t.Errorf("phase %s, available revision %q: want Degraded on the last good revision", p.Status.Phase, p.Status.AvailableRevision)
	}
	if got := deployment(t, ns).Generation; got != generation {
		t.Errorf("the Deployment moved from generation %d to %d while the proxy was blocked", generation, got)
	}
	other.Data["password"] = []byte("back")
	if err := k8s.Update(ctx, other); err != nil {
		t.Fatal(err)
	}
	waitProxy(t, ns, 2*time.Minute, "Ready once the key is back", isReady)

	// A Secret renamed under the running proxy (the name it references is gone): blocked,
	// named, and the running revision stays; back under its name, the proxy is Ready again.
	generation = deployment(t, ns).Generation
	salt := &corev1.Secret{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "pii-salt"}, salt); err != nil {
		t.Fatal(err)
	}
	renamed := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pii-salt-v2"}, Data: salt.Data}
	if err := k8s.Create(ctx, renamed); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Delete(ctx, salt); err != nil {
		t.Fatal(err)
	}
	p = waitProxy(t, ns, time.Minute, "ReferenceNotFound for the renamed Secret", func(p *nexov1alpha1.NexoProxy) bool {
		c := conditionOf(p, nexov1alpha1.ConditionReferencesResolved)
		return c.reason == nexov1alpha1.ReasonReferenceNotFound && strings.Contains(c.message, "Secret pii-salt not found")
	})
	if p.Status.Phase != nexov1alpha1.ProxyDegraded || deployment(t, ns).Generation != generation {
		t.Errorf("with its Secret renamed the proxy is %s and its Deployment moved from generation %d to %d: want Degraded on the running revision",
			p.Status.Phase, generation, deployment(t, ns).Generation)
	}
	salt.ObjectMeta = metav1.ObjectMeta{Namespace: ns, Name: "pii-salt"}
	if err := k8s.Create(ctx, salt); err != nil {
		t.Fatal(err)
	}
	waitProxy(t, ns, 2*time.Minute, "Ready once the Secret is back under its name", isReady)
}

// spec.proxyImage must be an image the proxy's profile approves. A tenant who may edit the
// NexoProxy but not the profile cannot make the operator run another image: the proxy is
// Validated=False (ImageNotApproved, naming the profile) and the Deployment keeps its image.
// Once the profile's owner approves the image, it runs.
func TestOnlyApprovedImagesRun(t *testing.T) {
	ns := "runtime-images"
	ctx := context.Background()
	applyGraph(t, ns, validLicense(t), nil)
	waitProxy(t, ns, 2*time.Minute, "Ready", isReady)
	images := func() []string {
		var out []string
		for _, c := range deployment(t, ns).Spec.Template.Spec.Containers {
			out = append(out, c.Image)
		}
		return out
	}
	before, generation := images(), deployment(t, ns).Generation

	tenant := tenantClient(t, ns)
	setImage := func(image string) {
		t.Helper()
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
			p := &nexov1alpha1.NexoProxy{}
			if err := tenant.Get(ctx, client.ObjectKey{Namespace: ns, Name: proxyName}, p); err != nil {
				return false, err
			}
			p.Spec.ProxyImage = nexov1alpha1.Image(image)
			return tenant.Update(ctx, p) == nil, nil
		})
		if err != nil {
			t.Fatalf("the tenant sets spec.proxyImage %s: %v", image, err)
		}
	}
	setImage("evil.example.com/miner:1")
	p := waitProxy(t, ns, time.Minute, "ImageNotApproved", func(p *nexov1alpha1.NexoProxy) bool {
		return conditionOf(p, nexov1alpha1.ConditionValidated).reason == nexov1alpha1.ReasonImageNotApproved && p.Status.ObservedGeneration == p.Generation
	})
	c := conditionOf(p, nexov1alpha1.ConditionValidated)
	if c.true || !strings.Contains(c.message, "NexoDeploymentProfile standard") || !strings.Contains(c.message, "evil.example.com/miner:1") ||
		!strings.Contains(c.message, "spec.approvedImages") {
		t.Errorf("Validated: %+v", c)
	}
	if p.Status.Phase != nexov1alpha1.ProxyDegraded {
		t.Errorf("phase %s, want Degraded on its last good revision", p.Status.Phase)
	}
	if got := images(); !slices.Equal(got, before) || deployment(t, ns).Generation != generation {
		t.Errorf("the Deployment runs %v (generation %d), want %v (generation %d)", got, deployment(t, ns).Generation, before, generation)
	}

	// The profile's owner (here the admin) approves an image; the tenant selects it.
	prof := &nexov1alpha1.NexoDeploymentProfile{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "standard"}, prof); err != nil {
		t.Fatal(err)
	}
	prof.Spec.ApprovedImages = []nexov1alpha1.Image{"registry.example.com/nexo/proxy:0.3.1"}
	if err := k8s.Update(ctx, prof); err != nil {
		t.Fatal(err)
	}
	setImage("registry.example.com/nexo/proxy:0.3.1")
	waitProxy(t, ns, 2*time.Minute, "Ready on the approved image", func(p *nexov1alpha1.NexoProxy) bool {
		return isReady(p) && conditionOf(p, nexov1alpha1.ConditionValidated).true
	})
	if got := images(); got[0] != "registry.example.com/nexo/proxy:0.3.1" || got[1] != "registry.example.com/nexo/proxy:0.3.1" {
		t.Errorf("ingress and egress run %v, want the approved image", got[:2])
	}
}
