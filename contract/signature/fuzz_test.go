package signature_test

import (
	"crypto/ed25519"
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/nexo-io/nexo-edge/contract/signature"
)

var fuzzPub, fuzzKey, _ = ed25519.GenerateKey(nil)

// FuzzSignVerify: any object that signs verifies, for its audience only; any one-byte change to
// its JSON afterwards either fails to decode, changes nothing the signature covers, or is refused
// with a reason. Verify never panics on arbitrary input.
func FuzzSignVerify(f *testing.F) {
	f.Add([]byte(`{"apiVersion":"nexo.io/v1alpha1","kind":"NexoRateLimit","metadata":{"name":"rl","namespace":"shop"},"spec":{"operationsPerSecond":5}}`), 10, byte('7'))
	f.Add([]byte(`{"apiVersion":"nexo.io/v1alpha1","kind":"NexoRouter","metadata":{"name":"r","namespace":"a","labels":{"x":"y"}},"spec":{"targets":[{"name":"p","address":"m:27017"}],"defaultTarget":"p"}}`), 60, byte('q'))
	f.Add([]byte(`{"kind":"X","metadata":{"annotations":{"nexo.io/signature":"!!","nexo.io/signing-key-id":"k"}}}`), 3, byte(0))
	trusted := map[string]ed25519.PublicKey{signature.KeyID(fuzzPub): fuzzPub}
	f.Fuzz(func(t *testing.T, raw []byte, at int, b byte) {
		u := &unstructured.Unstructured{}
		if err := json.Unmarshal(raw, &u.Object); err != nil || u.Object == nil {
			return
		}
		// Arbitrary input: never a panic, and a refusal always says why.
		if _, err := signature.Verify(u.DeepCopy(), trusted, "env0fuzz01"); err != nil && err.Error() == "" {
			t.Fatal("a refusal without a reason")
		}
		if err := signature.Sign(u, fuzzKey, signature.Claims{Audience: "env0fuzz01", Revision: 1}); err != nil {
			return // not signable (no metadata map, for example): refused, with an error
		}
		if _, err := signature.Verify(u, trusted, "env0fuzz01"); err != nil {
			t.Fatalf("a freshly signed object does not verify: %v", err)
		}
		if _, err := signature.Verify(u, trusted, "env0other1"); err == nil {
			t.Fatal("accepted for another environment")
		}
		signed, _ := json.Marshal(u.Object)
		if at < 0 || len(signed) == 0 {
			return
		}
		i := at % len(signed)
		if signed[i] == b {
			return
		}
		tampered := append([]byte{}, signed...)
		tampered[i] = b
		v := &unstructured.Unstructured{}
		if json.Unmarshal(tampered, &v.Object) != nil || v.Object == nil {
			return
		}
		// Accepted means nothing the signature covers changed.
		got, err := signature.Verify(v, trusted, "env0fuzz01")
		if err != nil {
			if err.Error() == "" {
				t.Fatal("a refusal without a reason")
			}
			return
		}
		before, err1 := signature.Canonical(u, signature.Claims{Audience: "env0fuzz01", Revision: 1})
		after, err2 := signature.Canonical(v, got.Claims)
		if err1 != nil || err2 != nil || string(before) != string(after) {
			t.Fatalf("a change to what the signature covers was accepted:\n%s\n%s", signed, tampered)
		}
	})
}
