package manifest

import (
	"strings"
	"testing"
)

// FuzzRead: arbitrary input never panics; every refusal has a reason; every object returned has a kind.
func FuzzRead(f *testing.F) {
	f.Add("kind: A\napiVersion: v1\n---\nkind: B\napiVersion: v1\n")
	f.Add("apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: A}\n")
	f.Add("kind: A\r\napiVersion: v1\r\n")
	f.Add("---\n# only a comment\n")
	f.Add(`{"apiVersion":"v1","kind":"List","items":[{"kind":"X"},"not an object"]}`)
	f.Fuzz(func(t *testing.T, in string) {
		objs, err := Read(strings.NewReader(in), "fuzz")
		if err != nil {
			if err.Error() == "" {
				t.Fatal("a refusal without a reason")
			}
			return
		}
		for _, o := range objs {
			if o.GetKind() == "" {
				t.Fatalf("an object without a kind from %q", in)
			}
		}
	})
}
