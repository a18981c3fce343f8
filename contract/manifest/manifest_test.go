package manifest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRead(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		kinds    []string
		err      string
	}{
		{"one document", "kind: A\napiVersion: v1\nmetadata: {name: a}\n", []string{"A"}, ""},
		{"leading separator and comments", "---\n# a comment\n---\nkind: A\napiVersion: v1\n--- # trailing comment\nkind: B\napiVersion: v1\n", []string{"A", "B"}, ""},
		{"CRLF", "kind: A\r\napiVersion: v1\r\n---\r\nkind: B\r\napiVersion: v1\r\n", []string{"A", "B"}, ""},
		{"a List", "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: A}\n- {apiVersion: v1, kind: B}\n", []string{"A", "B"}, ""},
		{"a typed list", "apiVersion: nexo.io/v1alpha1\nkind: NexoProxyList\nitems:\n- {apiVersion: nexo.io/v1alpha1, kind: NexoProxy}\n", []string{"NexoProxy"}, ""},
		{"JSON", `{"apiVersion":"v1","kind":"A"}`, []string{"A"}, ""},
		{"separator inside a block scalar is content", "kind: A\napiVersion: v1\ndata:\n  x: |\n    ---\n    y\n", []string{"A"}, ""},
		{"no kind", "apiVersion: v1\nmetadata: {name: a}\n", nil, "(document 1): no kind"},
		{"bad YAML", "kind: A\n  - : [\n", nil, "document 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := Read(strings.NewReader(tc.in), "in.yaml")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var kinds []string
			for _, o := range objs {
				kinds = append(kinds, o.GetKind())
			}
			if strings.Join(kinds, ",") != strings.Join(tc.kinds, ",") {
				t.Errorf("kinds %v, want %v", kinds, tc.kinds)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	_ = os.WriteFile(filepath.Join(dir, "a.yaml"), []byte("kind: A\napiVersion: v1\n"), 0o644)
	_ = os.MkdirAll(filepath.Join(dir, "sub"), 0o755)
	_ = os.WriteFile(filepath.Join(dir, "sub", "b.json"), []byte(`{"kind":"B","apiVersion":"v1"}`), 0o644)
	_ = os.WriteFile(filepath.Join(dir, "README.md"), []byte("# not a manifest"), 0o644)
	_ = os.WriteFile(filepath.Join(dir, "values.yaml"), []byte("replicas: 2\n"), 0o644) // no kind: skipped in a folder
	objs, err := Load(dir, nil)
	if err != nil || len(objs) != 2 {
		t.Fatalf("folder: %d objects, %v", len(objs), err)
	}
	objs, err = Load("-", strings.NewReader("kind: C\napiVersion: v1\n"))
	if err != nil || len(objs) != 1 || objs[0].GetKind() != "C" {
		t.Fatalf("stdin: %v %v", objs, err)
	}
	if objs, err = Load(filepath.Join(dir, "a.yaml"), nil); err != nil || len(objs) != 1 {
		t.Fatalf("file: %v %v", objs, err)
	}
}
