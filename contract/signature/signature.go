// Package signature signs and verifies Control-Plane-managed Nexo resources (docs/security.md, "Managed-resource signatures").
//
// A managed resource carries the label nexo.io/managed-by=control-plane and the annotations
// nexo.io/signature (base64 ed25519 signature), nexo.io/signing-key-id,
// nexo.io/signature-audience (the environment the manifest was signed for) and
// nexo.io/signature-revision (a number that only grows per object). The signed bytes are the
// canonical JSON (sorted keys, no insignificant whitespace) of
// {apiVersion, kind, metadata: {namespace, name}, spec, audience, revision}: a manifest signed
// for one environment does not verify in another, and a verifier that remembers the last
// revision it accepted can refuse an older one (replay).
//
// Whether a resource is verified depends on its annotations, never on the unsigned managed-by
// label alone: HasSignature says so (see IsManaged).
//
// The spec is canonicalised the way the operator will read it: the CRD's defaults are applied
// (the API server applies them on admission, so a manifest signed before defaulting still
// verifies after it), then it is decoded into and re-encoded from the Go type. The operator,
// the reference Control Plane and `nexoctl sign` all use this package.
package signature

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"sync"

	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/config/crd"
	"github.com/nexo-io/nexo-edge/contract/wire"
)

// Verification failures; Verify wraps them with detail.
var (
	ErrUnsigned   = errors.New("managed resource has no nexo.io/signature or nexo.io/signing-key-id annotation")
	ErrUnknownKey = errors.New("signing key is not trusted")
	ErrMismatch   = errors.New("signature does not match the resource's content")
	ErrAudience   = errors.New("manifest was signed for another environment")
)

// IsManaged reports whether an object is Control-Plane managed: it carries the managed-by label
// or any signature annotation. The label is not signed, so removing it never turns a signed
// object into an unverified one.
func IsManaged(labels, annotations map[string]string) bool {
	return labels[wire.ManagedByLabel] == wire.ManagedByControlPlane || HasSignature(annotations)
}

// Annotations are the annotations a signature writes.
var Annotations = []string{wire.SignatureAnnotation, wire.KeyIDAnnotation, wire.AudienceAnnotation, wire.RevisionAnnotation}

// HasSignature reports whether any signature annotation is present.
func HasSignature(annotations map[string]string) bool {
	for _, k := range Annotations {
		if _, ok := annotations[k]; ok {
			return true
		}
	}
	return false
}

// WithoutSignature returns annotations without the signature's (nil when none are left): what
// an author wrote, which every deploy signs afresh.
func WithoutSignature(annotations map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range annotations {
		if !slices.Contains(Annotations, k) {
			out[k] = v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// Claims are what a signature binds beside the object's identity and spec.
type Claims struct {
	// Audience is the environment id the manifest is for.
	Audience string
	// Revision grows with every signed change of one object (the Control Plane's sequence).
	Revision int64
}

// Signed is what a valid signature tells.
type Signed struct {
	Claims
	KeyID string
}

// KeyID is the key id of a public key: the first 16 hex digits of its sha256.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:8])
}

// Canonical returns the signed bytes of a Nexo object for the given claims.
func Canonical(obj runtime.Object, c Claims) ([]byte, error) {
	u, err := toUnstructured(obj)
	if err != nil {
		return nil, err
	}
	gvk := u.GroupVersionKind()
	spec, _, err := unstructured.NestedFieldNoCopy(u.Object, "spec")
	if err != nil {
		return nil, err
	}
	spec, err = normaliseSpec(gvk, spec)
	if err != nil {
		return nil, err
	}
	payload := map[string]any{
		"apiVersion": u.GetAPIVersion(),
		"kind":       u.GetKind(),
		"metadata":   map[string]any{"namespace": u.GetNamespace(), "name": u.GetName()},
		"spec":       spec,
		"audience":   c.Audience,
		"revision":   c.Revision,
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(payload); err != nil { // encoding/json sorts map keys
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// Sign sets the managed label and the signature annotations on obj, binding the claims.
func Sign(obj runtime.Object, priv ed25519.PrivateKey, c Claims) error {
	u, ok := obj.(metaObject)
	if !ok {
		return fmt.Errorf("cannot sign %T", obj)
	}
	if c.Audience == "" || c.Revision < 1 {
		return errors.New("a signature needs an audience (environment id) and a revision of at least 1")
	}
	labels := u.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[wire.ManagedByLabel] = wire.ManagedByControlPlane
	u.SetLabels(labels)
	data, err := Canonical(obj, c)
	if err != nil {
		return err
	}
	ann := u.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[wire.SignatureAnnotation] = base64.StdEncoding.EncodeToString(ed25519.Sign(priv, data))
	ann[wire.KeyIDAnnotation] = KeyID(priv.Public().(ed25519.PublicKey))
	ann[wire.AudienceAnnotation] = c.Audience
	ann[wire.RevisionAnnotation] = strconv.FormatInt(c.Revision, 10)
	u.SetAnnotations(ann)
	return nil
}

// Verify checks obj's signature against the trusted keys (key id → public key) and the expected
// audience. It returns what the signature binds when it is valid, or an error wrapping
// ErrUnsigned, ErrUnknownKey, ErrMismatch or ErrAudience. An empty audience is never accepted:
// a verifier that does not know its environment cannot tell a replay from elsewhere.
func Verify(obj runtime.Object, trusted map[string]ed25519.PublicKey, audience string) (Signed, error) {
	u, ok := obj.(metaObject)
	if !ok {
		return Signed{}, fmt.Errorf("cannot verify %T", obj)
	}
	ann := u.GetAnnotations()
	sig, keyID := ann[wire.SignatureAnnotation], ann[wire.KeyIDAnnotation]
	if sig == "" || keyID == "" {
		return Signed{}, ErrUnsigned
	}
	out := Signed{KeyID: keyID, Claims: Claims{Audience: ann[wire.AudienceAnnotation]}}
	if out.Audience == "" || ann[wire.RevisionAnnotation] == "" {
		return out, fmt.Errorf("%w: the signature has no %s or %s annotation; have the Control Plane re-sign it", ErrUnsigned, wire.AudienceAnnotation, wire.RevisionAnnotation)
	}
	rev, err := strconv.ParseInt(ann[wire.RevisionAnnotation], 10, 64)
	if err != nil || rev < 1 {
		return out, fmt.Errorf("%w: %s must be a whole number of at least 1", ErrMismatch, wire.RevisionAnnotation)
	}
	out.Revision = rev
	pub, ok := trusted[keyID]
	if !ok {
		return out, fmt.Errorf("%w: key id %q is not among the %d trusted keys", ErrUnknownKey, keyID, len(trusted))
	}
	raw, err := base64.StdEncoding.DecodeString(sig)
	if err != nil {
		return out, fmt.Errorf("%w: nexo.io/signature is not base64", ErrMismatch)
	}
	data, err := Canonical(obj, out.Claims)
	if err != nil {
		return out, err
	}
	if !ed25519.Verify(pub, data, raw) {
		return out, fmt.Errorf("%w (key id %s): the spec, name, namespace, audience or revision changed after signing", ErrMismatch, keyID)
	}
	if audience == "" {
		return out, fmt.Errorf("%w: this verifier has no environment id configured, so it cannot accept a manifest signed for %q", ErrAudience, out.Audience)
	}
	if out.Audience != audience {
		return out, fmt.Errorf("%w: signed for environment %q, this cluster is environment %q", ErrAudience, out.Audience, audience)
	}
	return out, nil
}

// ParsePublicKey reads an ed25519 public key from PEM (PKIX "PUBLIC KEY") or base64 of the raw
// 32 bytes.
func ParsePublicKey(data []byte) (ed25519.PublicKey, error) {
	if block, _ := pem.Decode(data); block != nil {
		k, err := x509.ParsePKIXPublicKey(block.Bytes)
		if err != nil {
			return nil, err
		}
		pub, ok := k.(ed25519.PublicKey)
		if !ok {
			return nil, fmt.Errorf("PEM key is %T, want ed25519", k)
		}
		return pub, nil
	}
	raw, err := base64.StdEncoding.DecodeString(string(bytes.TrimSpace(data)))
	if err != nil || len(raw) != ed25519.PublicKeySize {
		return nil, errors.New("not a PEM public key nor base64 of 32 raw ed25519 bytes")
	}
	return ed25519.PublicKey(raw), nil
}

// ParsePrivateKey reads an ed25519 private key from PEM (PKCS#8 "PRIVATE KEY").
func ParsePrivateKey(data []byte) (ed25519.PrivateKey, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("no PEM block in private key file")
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, err
	}
	priv, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("PEM key is %T, want ed25519", k)
	}
	return priv, nil
}

// MarshalPublicKey encodes a public key as PEM.
func MarshalPublicKey(pub ed25519.PublicKey) []byte {
	der, _ := x509.MarshalPKIXPublicKey(pub)
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
}

// MarshalPrivateKey encodes a private key as PEM.
func MarshalPrivateKey(priv ed25519.PrivateKey) []byte {
	der, _ := x509.MarshalPKCS8PrivateKey(priv)
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

type metaObject interface {
	runtime.Object
	GetLabels() map[string]string
	SetLabels(map[string]string)
	GetAnnotations() map[string]string
	SetAnnotations(map[string]string)
}

var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := nexov1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}()

func toUnstructured(obj runtime.Object) (*unstructured.Unstructured, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		return u, nil
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	if u.GetKind() == "" { // typed objects from a client carry no TypeMeta
		gvks, _, err := scheme.ObjectKinds(obj)
		if err != nil {
			return nil, err
		}
		u.SetGroupVersionKind(gvks[0])
	}
	return u, nil
}

// normaliseSpec reads spec the way the operator does, then applies the CRD's defaults, then reads
// it again: Go type, defaults, Go type. The first pass matters: a struct field without a pointer
// (NexoDeploymentProfile's defaults) is written back as {} even when a manifest omits it, and the
// defaults inside it then apply; a manifest signed without the field and the stored object read
// through the Go type must reach the same form (both do after the first pass).
func normaliseSpec(gvk schema.GroupVersionKind, spec any) (any, error) {
	s, err := structuralFor(gvk.Kind)
	if err != nil {
		return nil, err
	}
	typed, err := throughType(gvk, spec)
	if err != nil {
		return nil, err
	}
	root := map[string]any{"spec": typed}
	defaulting.Default(root, s)
	return throughType(gvk, root["spec"])
}

// throughType decodes spec into the kind's Go spec type and encodes it again (numbers kept as
// written: json.Number).
func throughType(gvk schema.GroupVersionKind, spec any) (any, error) {
	raw, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	typed, err := scheme.New(gvk)
	if err != nil {
		return nil, fmt.Errorf("%s is not a Nexo kind: %w", gvk.Kind, err)
	}
	specField := reflect.ValueOf(typed).Elem().FieldByName("Spec")
	if !specField.IsValid() {
		return nil, fmt.Errorf("%s has no spec", gvk.Kind)
	}
	if err := json.Unmarshal(raw, specField.Addr().Interface()); err != nil {
		return nil, fmt.Errorf("%s spec does not match its schema: %w", gvk.Kind, err)
	}
	if raw, err = json.Marshal(specField.Interface()); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var out any
	return out, dec.Decode(&out)
}

var structurals sync.Map // kind → *structuralschema.Structural

func structuralFor(kind string) (*structuralschema.Structural, error) {
	if s, ok := structurals.Load(kind); ok {
		return s.(*structuralschema.Structural), nil
	}
	crds, err := crd.ByKind()
	if err != nil {
		return nil, err
	}
	c, ok := crds[kind]
	if !ok {
		return nil, fmt.Errorf("%s is not a Nexo kind", kind)
	}
	internal := &apiextensionsinternal.JSONSchemaProps{}
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(c.Spec.Versions[0].Schema.OpenAPIV3Schema, internal, nil); err != nil {
		return nil, err
	}
	s, err := structuralschema.NewStructural(internal)
	if err != nil {
		return nil, err
	}
	structurals.Store(kind, s)
	return s, nil
}
