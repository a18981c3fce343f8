package signature_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/contract/signature"
	"github.com/nexo-io/nexo-edge/contract/wire"
)

const proxyYAML = `
apiVersion: nexo.io/v1alpha1
kind: NexoProxy
metadata:
  name: p
  namespace: shop
spec:
  pipelineRef: {name: orders}
  upstream: {name: primary, address: "mongo:27017"}
  profileRef: {name: standard}
  licenseRef: {name: acme}
`

func manifest(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(proxyYAML), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

func keys(t *testing.T) (ed25519.PrivateKey, map[string]ed25519.PublicKey) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return priv, map[string]ed25519.PublicKey{signature.KeyID(pub): pub}
}

// asStored turns a signed manifest into what the operator reads: a typed object whose defaults
// the API server filled in (spec.port) and whose TypeMeta a typed client leaves empty.
func asStored(t *testing.T, u *unstructured.Unstructured) *nexov1alpha1.NexoProxy {
	t.Helper()
	raw, err := u.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	p := &nexov1alpha1.NexoProxy{}
	if err := yaml.Unmarshal(raw, p); err != nil {
		t.Fatal(err)
	}
	p.Spec.Port = 27017
	p.TypeMeta = nexov1alpha1.NexoProxy{}.TypeMeta
	p.ResourceVersion, p.Generation, p.UID = "42", 3, "uid"
	return p
}

// claims are the audience and revision the tests sign with.
var claims = signature.Claims{Audience: "env-a", Revision: 7}

func TestSignedManifestVerifiesAfterDefaulting(t *testing.T) {
	priv, trusted := keys(t)
	u := manifest(t)
	if err := signature.Sign(u, priv, claims); err != nil {
		t.Fatal(err)
	}
	if !signature.IsManaged(u.GetLabels(), nil) {
		t.Fatal("Sign did not set the managed-by label")
	}
	got, err := signature.Verify(asStored(t, u), trusted, claims.Audience)
	if err != nil {
		t.Fatalf("verify defaulted typed object: %v", err)
	}
	if got.Claims != claims {
		t.Fatalf("verified claims %+v, want %+v", got.Claims, claims)
	}
}

func TestVerifyFailures(t *testing.T) {
	priv, trusted := keys(t)
	otherPriv, _ := keys(t)

	signed := func() *nexov1alpha1.NexoProxy {
		u := manifest(t)
		if err := signature.Sign(u, priv, claims); err != nil {
			t.Fatal(err)
		}
		return asStored(t, u)
	}
	cases := map[string]struct {
		obj  func() *nexov1alpha1.NexoProxy
		want error
	}{
		"tampered spec": {func() *nexov1alpha1.NexoProxy {
			p := signed()
			p.Spec.Upstream.Address = "evil:27017"
			return p
		}, signature.ErrMismatch},
		"moved to another namespace": {func() *nexov1alpha1.NexoProxy {
			p := signed()
			p.Namespace = "other"
			return p
		}, signature.ErrMismatch},
		"unsigned": {func() *nexov1alpha1.NexoProxy {
			p := signed()
			delete(p.Annotations, wire.SignatureAnnotation)
			return p
		}, signature.ErrUnsigned},
		"unknown key": {func() *nexov1alpha1.NexoProxy {
			u := manifest(t)
			if err := signature.Sign(u, otherPriv, claims); err != nil {
				t.Fatal(err)
			}
			return asStored(t, u)
		}, signature.ErrUnknownKey},
		"revision edited (replay of an older one under a new number)": {func() *nexov1alpha1.NexoProxy {
			p := signed()
			p.Annotations[wire.RevisionAnnotation] = "8"
			return p
		}, signature.ErrMismatch},
		"audience edited": {func() *nexov1alpha1.NexoProxy {
			p := signed()
			p.Annotations[wire.AudienceAnnotation] = "env-other"
			return p
		}, signature.ErrMismatch},
		"signed for another environment": {func() *nexov1alpha1.NexoProxy {
			u := manifest(t)
			if err := signature.Sign(u, priv, signature.Claims{Audience: "env-other", Revision: 7}); err != nil {
				t.Fatal(err)
			}
			return asStored(t, u)
		}, signature.ErrAudience},
		"no audience or revision (an old-style signature)": {func() *nexov1alpha1.NexoProxy {
			p := signed()
			delete(p.Annotations, wire.AudienceAnnotation)
			delete(p.Annotations, wire.RevisionAnnotation)
			return p
		}, signature.ErrUnsigned},
		"garbage signature": {func() *nexov1alpha1.NexoProxy {
			p := signed()
			p.Annotations[wire.SignatureAnnotation] = "!!!"
			return p
		}, signature.ErrMismatch},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := signature.Verify(c.obj(), trusted, claims.Audience)
			if !errors.Is(err, c.want) {
				t.Fatalf("got %v, want %v", err, c.want)
			}
		})
	}
	// Metadata other than name and namespace is not signed.
	p := signed()
	p.Labels["team"] = "a"
	p.Annotations["note"] = "b"
	if _, err := signature.Verify(p, trusted, claims.Audience); err != nil {
		t.Fatalf("labels/annotations changed verification: %v", err)
	}
	// A verifier without an environment accepts nothing.
	if _, err := signature.Verify(signed(), trusted, ""); !errors.Is(err, signature.ErrAudience) {
		t.Fatalf("empty expected audience: got %v, want ErrAudience", err)
	}
}

func TestManagedFollowsTheAnnotationsNotOnlyTheLabel(t *testing.T) {
	if !signature.IsManaged(nil, map[string]string{wire.SignatureAnnotation: "x"}) {
		t.Fatal("an object with a signature annotation but no managed-by label counts as unmanaged")
	}
	if signature.IsManaged(map[string]string{"team": "a"}, map[string]string{"note": "b"}) {
		t.Fatal("an object with neither label nor signature counts as managed")
	}
}

func TestCanonicalIsSortedCompactJSON(t *testing.T) {
	data, err := signature.Canonical(manifest(t), claims)
	if err != nil {
		t.Fatal(err)
	}
	s := string(data)
	if strings.ContainsAny(s, " \n\t") {
		t.Errorf("canonical JSON has whitespace: %s", s)
	}
	if !strings.HasPrefix(s, `{"apiVersion":"nexo.io/v1alpha1","audience":"env-a","kind":"NexoProxy","metadata":{"name":"p","namespace":"shop"},"revision":7,"spec":{`) {
		t.Errorf("unexpected canonical prefix: %s", s)
	}
	if !strings.Contains(s, `"port":27017`) {
		t.Errorf("CRD default spec.port missing from canonical form: %s", s)
	}
}

func TestKeyRoundTrip(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	gotPub, err := signature.ParsePublicKey(signature.MarshalPublicKey(pub))
	if err != nil || !gotPub.Equal(pub) {
		t.Fatalf("public key round trip: %v", err)
	}
	gotPriv, err := signature.ParsePrivateKey(signature.MarshalPrivateKey(priv))
	if err != nil || !gotPriv.Equal(priv) {
		t.Fatalf("private key round trip: %v", err)
	}
	if _, err := signature.ParsePublicKey([]byte("not a key")); err == nil {
		t.Fatal("garbage parsed as a key")
	}
	if id := signature.KeyID(pub); len(id) != 16 || id != signature.KeyID(gotPub) {
		t.Fatalf("key id %q not stable 16 hex digits", id)
	}
}

// A profile signed without its optional defaults block verifies as the operator reads it back:
// the Go type writes the block as {} and the CRD's default inside it (replicas: 2) would apply
// on one side only (found by the reliability suite: every Control Plane deploy of such a
// profile was refused as SignatureMismatch).
func TestOmittedStructFieldVerifies(t *testing.T) {
	priv, trusted := keys(t)
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(`apiVersion: nexo.io/v1alpha1
kind: NexoDeploymentProfile
metadata: {name: hosted, namespace: shop}
spec:
  images: {ingress: registry.example.com/nexo/ingress:0.2.0, egress: registry.example.com/nexo/egress:0.2.0}
`), &u.Object); err != nil {
		t.Fatal(err)
	}
	if err := signature.Sign(u, priv, claims); err != nil {
		t.Fatal(err)
	}
	raw, err := u.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	stored := &nexov1alpha1.NexoDeploymentProfile{}
	if err := yaml.Unmarshal(raw, stored); err != nil {
		t.Fatal(err)
	}
	// What the API server defaults at the top level of the stored spec (no defaults block).
	stored.Spec.DrainTimeoutSeconds, stored.Spec.ProgressDeadlineSeconds = 30, 600
	if _, err := signature.Verify(stored, trusted, claims.Audience); err != nil {
		t.Fatalf("profile without a defaults block: %v", err)
	}
}
