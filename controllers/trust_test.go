package controllers_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/contract/license"
	"github.com/nexo-io/nexo-edge/contract/scheme"
	"github.com/nexo-io/nexo-edge/contract/signature"
	"github.com/nexo-io/nexo-edge/contract/wire"
	"github.com/nexo-io/nexo-edge/controllers/render"
	"github.com/nexo-io/nexo-edge/test/framework/testinstall"
)

// tenantClient is a plain user with edit rights on Nexo objects and Secrets in one namespace
// only (the tenant of docs/security.md, "Actors").
func tenantClient(t *testing.T, ns string) client.Client {
	t.Helper()
	cfg, err := testinstall.Tenant(context.Background(), cluster, ns)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func secretExists(t *testing.T, ns, name string) bool {
	t.Helper()
	err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &corev1.Secret{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	return err == nil
}

func setPullSecrets(t *testing.T, c client.Client, ns string, names ...string) {
	t.Helper()
	ctx := context.Background()
	prof := &nexov1alpha1.NexoDeploymentProfile{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "standard"}, prof); err != nil {
		t.Fatal(err)
	}
	prof.Spec.ImagePullSecrets = nil
	for _, n := range names {
		prof.Spec.ImagePullSecrets = append(prof.Spec.ImagePullSecrets, nexov1alpha1.SecretReference{Name: n})
	}
	if err := c.Update(ctx, prof); err != nil {
		t.Fatal(err)
	}
}

// TestTenantCannotCopyOperatorNamespaceSecrets: a tenant names the connect token, then an
// unmarked registry Secret, of the operator namespace as image-pull Secrets. The proxy is blocked
// with a reason naming the Secret and nothing is copied; a marked registry credential is copied,
// and its copy goes as soon as the profile stops naming it, or its source loses the mark.
func TestTenantCannotCopyOperatorNamespaceSecrets(t *testing.T) {
	ns := "tenant-a"
	ctx := context.Background()
	const token = "nexo-ct-v1.0123456789ab.tenant-must-never-see-this-value"
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Name: wire.ConnectTokenSecret, Namespace: operatorNamespace}, Data: map[string][]byte{"token": []byte(token)}},
		{ObjectMeta: metav1.ObjectMeta{Name: "unmarked-registry", Namespace: operatorNamespace}, Type: corev1.SecretTypeDockerConfigJson,
			Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"r.example.com":{"auth":"eDp5"}}}`)}},
		{ObjectMeta: metav1.ObjectMeta{Name: "team-registry", Namespace: operatorNamespace, Labels: map[string]string{wire.RegistryCredentialLabel: "true"}},
			Type: corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"t.example.com":{"auth":"eDp6"}}}`)}},
	} {
		if err := k8s.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	tenant := tenantClient(t, ns)
	// The tenant cannot read the operator namespace directly...
	if err := tenant.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: wire.ConnectTokenSecret}, &corev1.Secret{}); !apierrors.IsForbidden(err) {
		t.Fatalf("tenant reading the connect token: %v, want Forbidden", err)
	}
	// ...nor through the operator.
	applyGraphAs(t, tenant, ns, validLicense(t), func(kind string, u *unstructured.Unstructured) bool {
		if kind == "NexoDeploymentProfile" {
			_ = unstructured.SetNestedSlice(u.Object, []any{map[string]any{"name": wire.ConnectTokenSecret}}, "spec", "imagePullSecrets")
		}
		return true
	})
	p := waitProxy(t, ns, time.Minute, "blocked on the connect token", hasReason(nexov1alpha1.ReasonPullSecretNotShareable))
	if _, msg := readyReason(p); !strings.Contains(msg, wire.ConnectTokenSecret) || strings.Contains(msg, token) {
		t.Errorf("reason does not name the Secret (or shows its value): %s", msg)
	}
	if secretExists(t, ns, render.PullSecretName(proxyName, wire.ConnectTokenSecret)) {
		t.Fatal("the connect token was copied into the tenant namespace")
	}
	if secretExists(t, ns, proxyName) || func() bool {
		err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: proxyName}, &corev1.Service{})
		return err == nil
	}() {
		t.Fatal("children were written for a proxy blocked on its pull Secrets")
	}

	setPullSecrets(t, tenant, ns, "unmarked-registry")
	waitProxy(t, ns, time.Minute, "blocked on the unmarked registry Secret", func(p *nexov1alpha1.NexoProxy) bool {
		r, msg := readyReason(p)
		return r == nexov1alpha1.ReasonPullSecretNotShareable && strings.Contains(msg, "unmarked-registry")
	})
	if secretExists(t, ns, render.PullSecretName(proxyName, "unmarked-registry")) {
		t.Fatal("an unmarked registry Secret was copied")
	}

	setPullSecrets(t, tenant, ns, "team-registry", "nexo-registry")
	waitProxy(t, ns, 2*time.Minute, "Ready with marked registry credentials", isReady)
	teamCopy := render.PullSecretName(proxyName, "team-registry")
	if !secretExists(t, ns, teamCopy) || !secretExists(t, ns, render.PullSecretName(proxyName, "nexo-registry")) {
		t.Fatal("marked registry credentials were not copied")
	}

	// The profile stops naming team-registry: its copy goes.
	setPullSecrets(t, tenant, ns, "nexo-registry")
	waitGone := func(what string) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			return !secretExists(t, ns, teamCopy), nil
		}); err != nil {
			t.Fatalf("the copy of team-registry stayed after %s", what)
		}
	}
	waitGone("the profile stopped naming it")
	waitProxy(t, ns, 2*time.Minute, "Ready without team-registry", isReady)

	// Named again, copied again; then the installer removes the mark: the copy goes and the
	// proxy reports why.
	setPullSecrets(t, tenant, ns, "team-registry", "nexo-registry")
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return secretExists(t, ns, teamCopy), nil
	}); err != nil {
		t.Fatal("team-registry not copied again")
	}
	src := &corev1.Secret{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: "team-registry"}, src); err != nil {
		t.Fatal(err)
	}
	delete(src.Labels, wire.RegistryCredentialLabel)
	if err := k8s.Update(ctx, src); err != nil {
		t.Fatal(err)
	}
	waitGone("its source lost the registry-credential mark")
	waitProxy(t, ns, time.Minute, "Degraded on the unmarked source", func(p *nexov1alpha1.NexoProxy) bool {
		r, _ := readyReason(p)
		return r == nexov1alpha1.ReasonPullSecretNotShareable && p.Status.Phase == nexov1alpha1.ProxyDegraded
	})
	if strings.Contains(operatorLogs.String(), token) {
		t.Fatal("the connect token appeared in the operator's logs")
	}
}

// signProxy signs the cluster's NexoProxy of ns with claims after mutate, and updates it.
func signedProxyUpdate(t *testing.T, ns string, claims signature.Claims, mutate func(*nexov1alpha1.NexoProxy)) *nexov1alpha1.NexoProxy {
	t.Helper()
	ctx := context.Background()
	p := &nexov1alpha1.NexoProxy{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: proxyName}, p); err != nil {
		t.Fatal(err)
	}
	mutate(p)
	if err := signature.Sign(p, cpKey, claims); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSignatureCannotBeSwitchedOffOrReplayed: a signed proxy edited with its managed-by label
// removed is still verified and refused; an older signed manifest re-applied is refused as a
// replay; a manifest signed for another environment is refused. Each time the Deployment keeps
// the last accepted revision (fail static).
func TestSignatureCannotBeSwitchedOffOrReplayed(t *testing.T) {
	ns := "replay"
	applyGraph(t, ns, validLicense(t), func(kind string, u *unstructured.Unstructured) bool {
		if kind == "NexoProxy" {
			u.SetNamespace(ns)
			if err := signature.Sign(u, cpKey, signedFor(5)); err != nil {
				t.Fatal(err)
			}
		}
		return true
	})
	good := waitProxy(t, ns, 2*time.Minute, "Ready at revision 5", isReady)
	if good.Status.SignedRevision != 5 {
		t.Fatalf("signedRevision %d, want 5", good.Status.SignedRevision)
	}
	replicas := *deployment(t, ns).Spec.Replicas
	ctx := context.Background()
	unchanged := func(what string) {
		t.Helper()
		if d := deployment(t, ns); *d.Spec.Replicas != replicas || d.Spec.Template.Annotations[render.GraphRevisionKey] != good.Status.GraphRevision {
			t.Fatalf("%s reached the Deployment (replicas %d, revision %s)", what, *d.Spec.Replicas, d.Spec.Template.Annotations[render.GraphRevisionKey])
		}
	}

	// 1. Edit the spec and drop the managed-by label (the signature annotations stay).
	p := &nexov1alpha1.NexoProxy{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: proxyName}, p); err != nil {
		t.Fatal(err)
	}
	old := p.DeepCopy()
	p.Spec.Replicas = ptr.To(replicas + 3)
	delete(p.Labels, wire.ManagedByLabel)
	if err := k8s.Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	waitProxy(t, ns, time.Minute, "refused after the label was dropped", func(p *nexov1alpha1.NexoProxy) bool {
		r, _ := readyReason(p)
		return r == nexov1alpha1.ReasonSignatureMismatch && p.Status.Phase == nexov1alpha1.ProxyDegraded
	})
	unchanged("an edit with the managed-by label dropped")

	// 2. Drop the whole signature too: the object was signed, so it stays refused.
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: proxyName}, p); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{wire.SignatureAnnotation, wire.KeyIDAnnotation, wire.AudienceAnnotation, wire.RevisionAnnotation} {
		delete(p.Annotations, k)
	}
	if err := k8s.Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	waitProxy(t, ns, time.Minute, "refused after the signature was stripped", hasReason(nexov1alpha1.ReasonUnsigned))
	unchanged("an edit with the signature stripped")

	// 3. A newer signed manifest is accepted.
	signedProxyUpdate(t, ns, signedFor(6), func(p *nexov1alpha1.NexoProxy) { p.Spec = old.Spec })
	p = waitProxy(t, ns, 2*time.Minute, "Ready at revision 6", func(p *nexov1alpha1.NexoProxy) bool { return isReady(p) && p.Status.SignedRevision == 6 })

	// 4. The revision-5 manifest re-applied (a replay of an older, validly signed change).
	signedProxyUpdate(t, ns, signedFor(5), func(p *nexov1alpha1.NexoProxy) { p.Spec.Replicas = ptr.To(replicas + 1) })
	waitProxy(t, ns, time.Minute, "replay refused", hasReason(nexov1alpha1.ReasonSignatureReplayed))
	unchanged("a replayed older manifest")

	// 5. Signed for another environment, at a higher revision.
	signedProxyUpdate(t, ns, signature.Claims{Audience: "ffffffffffff", Revision: 9}, func(p *nexov1alpha1.NexoProxy) { p.Spec.Replicas = ptr.To(replicas + 1) })
	waitProxy(t, ns, time.Minute, "other environment refused", hasReason(nexov1alpha1.ReasonWrongAudience))
	unchanged("another environment's manifest")
}

// TestLicenseSlotsHoldPerDocument: a license document for one proxy, copied by a tenant into a
// second NexoLicense (another Secret, another namespace), still covers one proxy: the second
// proxy is refused with LicenseExhausted, and takes the slot once the first proxy is gone.
func TestLicenseSlotsHoldPerDocument(t *testing.T) {
	ctx := context.Background()
	doc, err := license.Issue(license.Claims{Licensee: "Acme Corp", ExpiresAt: time.Now().Add(24 * time.Hour), Entitlements: allStepKinds, MaxProxies: 1}, vendorKey)
	if err != nil {
		t.Fatal(err)
	}
	applyGraph(t, "slots-a", []byte(doc), nil)
	first := waitProxy(t, "slots-a", 2*time.Minute, "Ready", isReady)
	lic := &nexov1alpha1.NexoLicense{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: "slots-a", Name: first.Spec.LicenseRef.Name}, lic); err != nil || lic.Status.DocumentID == "" {
		t.Fatalf("license status has no documentID: %+v (%v)", lic.Status, err)
	}
	if strings.Contains(doc, lic.Status.DocumentID) {
		t.Fatal("the documentID is a piece of the document")
	}

	applyGraphAs(t, tenantClient(t, "slots-b"), "slots-b", []byte(doc), nil)
	second := waitProxy(t, "slots-b", time.Minute, "refused: the document's one slot is taken", hasReason(nexov1alpha1.ReasonLicenseExhausted))
	if _, msg := readyReason(second); !strings.Contains(msg, "covers 1 proxies and 2 use its license document") {
		t.Errorf("message: %s", msg)
	}
	if err := k8s.Delete(ctx, first); err != nil {
		t.Fatal(err)
	}
	waitProxy(t, "slots-b", 2*time.Minute, "Ready once the slot is free", isReady)
}
