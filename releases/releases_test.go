package releases_test

import (
	"path/filepath"
	"sort"
	"testing"
	"testing/fstest"

	"github.com/nexo-io/nexo-edge/catalog"
	"github.com/nexo-io/nexo-edge/releases"
)

// TestEveryReleaseIsEmbedded: each folder under releases/ with a release.json is in the
// embedded matrix, with every kind of the catalog, each reconciled or schema-only.
func TestEveryReleaseIsEmbedded(t *testing.T) {
	m, err := releases.SupportMatrix(releases.FS())
	if err != nil {
		t.Fatal(err)
	}
	onDisk, _ := filepath.Glob("*/release.json")
	var want, got []string
	for _, f := range onDisk {
		want = append(want, filepath.Dir(f))
	}
	for v, kinds := range m {
		got = append(got, v)
		if len(kinds) != len(catalog.Kinds) {
			t.Errorf("release %s: %d kinds, want %d", v, len(kinds), len(catalog.Kinds))
		}
	}
	sort.Strings(want)
	sort.Strings(got)
	if len(want) == 0 || len(want) != len(got) {
		t.Fatalf("releases on disk %v, embedded %v", want, got)
	}
	for i := range want {
		if want[i] != got[i] {
			t.Fatalf("releases on disk %v, embedded %v", want, got)
		}
	}
}

// TestSupportMatrixReadsEachVersion: two versions that differ in one kind give two matrices
// that differ in that kind; a CRD without the label is refused, naming the file.
func TestSupportMatrixReadsEachVersion(t *testing.T) {
	crd := func(kind, support string) *fstest.MapFile {
		return &fstest.MapFile{Data: []byte("metadata:\n  labels:\n    nexo.io/support: " + support + "\nspec:\n  names:\n    kind: " + kind + "\n")}
	}
	m, err := releases.SupportMatrix(fstest.MapFS{
		"1.0.0/crds/a.yaml": crd("NexoQueryGuard", "schema-only"),
		"1.1.0/crds/a.yaml": crd("NexoQueryGuard", "reconciled"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if m["1.0.0"]["NexoQueryGuard"] != catalog.SchemaOnly || m["1.1.0"]["NexoQueryGuard"] != catalog.Reconciled {
		t.Errorf("matrix %v", m)
	}
	if _, err := releases.SupportMatrix(fstest.MapFS{"1.0.0/crds/a.yaml": crd("NexoQueryGuard", "")}); err == nil {
		t.Error("a CRD without nexo.io/support was accepted")
	}
}
