package signature_test

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"sort"
	"testing"

	"github.com/nexo-io/nexo-edge/catalog"
	"github.com/nexo-io/nexo-edge/contract/signature"
	"github.com/nexo-io/nexo-edge/test/framework/reliabilityreport"
	"github.com/nexo-io/nexo-edge/test/framework/testcluster"
)

// leaves lists the paths of every scalar under v (map keys sorted, list items by index).
func leaves(v any, path []string, out *[][]string) {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			leaves(x[k], append(append([]string{}, path...), k), out)
		}
	case []any:
		for i, item := range x {
			leaves(item, append(append([]string{}, path...), fmt.Sprint(i)), out)
		}
	default:
		*out = append(*out, path)
	}
}

// change replaces the scalar at path with a different value of the same type.
func change(v any, path []string) any {
	if len(path) == 0 {
		switch x := v.(type) {
		case string:
			return x + "x"
		case bool:
			return !x
		case int64:
			return x + 1
		case float64:
			return x + 1
		case nil:
			return "x"
		}
		return v
	}
	switch x := v.(type) {
	case map[string]any:
		x[path[0]] = change(x[path[0]], path[1:])
		return x
	case []any:
		var i int
		fmt.Sscan(path[0], &i)
		x[i] = change(x[i], path[1:])
		return x
	}
	return v
}

// TestEveryFieldIsCovered: for the sample of every managed (reconciled) kind, a change of any
// one field of its spec, or of its name or namespace, after signing, is refused as a mismatch.
func TestEveryFieldIsCovered(t *testing.T) {
	samples, err := testcluster.Samples()
	if err != nil {
		t.Fatal(err)
	}
	pub, key, _ := ed25519.GenerateKey(nil)
	trusted := map[string]ed25519.PublicKey{signature.KeyID(pub): pub}
	fields, kinds := 0, 0
	for _, k := range catalog.Kinds {
		if k.Support != catalog.Reconciled {
			continue
		}
		kinds++
		base := samples[k.Kind].DeepCopy()
		base.SetNamespace("shop")
		if err := signature.Sign(base, key, signature.Claims{Audience: "env0tamper", Revision: 4}); err != nil {
			t.Fatal(err)
		}
		var paths [][]string
		leaves(base.Object["spec"], []string{"spec"}, &paths)
		paths = append(paths, []string{"metadata", "name"}, []string{"metadata", "namespace"})
		for _, p := range paths {
			obj := base.DeepCopy()
			change(obj.Object, p)
			if _, err := signature.Verify(obj, trusted, "env0tamper"); !errors.Is(err, signature.ErrMismatch) {
				t.Errorf("%s: changing %v after signing: %v, want a mismatch", k.Kind, p, err)
			}
			fields++
		}
		if _, err := signature.Verify(base, trusted, "env0tamper"); err != nil {
			t.Fatalf("%s: the untouched sample does not verify: %v", k.Kind, err)
		}
	}
	if fields < 100 {
		t.Errorf("only %d fields tried", fields)
	}
	reliabilityreport.Figure(t, "one-field changes after signing", fmt.Sprintf("%d changes over %d managed kinds, every one refused", fields, kinds))
}
