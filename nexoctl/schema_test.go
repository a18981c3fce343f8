package nexoctl_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/nexo-io/nexo-edge/preflight/schemadiff"
	"github.com/nexo-io/nexo-edge/test/framework/testcluster"
)

// nexoctl schema diff, offline: a folder against this build; a field removed from a copy of the
// CRDs is reported as breaking in every format; a source that is no set of CRDs exits 2 with
// what it takes.
func TestSchemaDiff(t *testing.T) {
	bases := filepath.Join(testcluster.RepoRoot(), "config", "crd", "bases")
	out, errOut, code := run(t, "", "schema", "diff", bases, "build")
	if code != 0 || !strings.Contains(out, "no schema changes") {
		t.Fatalf("same CRDs: %d %q %q", code, out, errOut)
	}
	// A copy of the CRDs whose NexoProxy has no spec.proxyImage: an upgrade from it adds a field,
	// a downgrade to it removes one.
	dir := t.TempDir()
	files, _ := filepath.Glob(filepath.Join(bases, "*.yaml"))
	for _, f := range files {
		raw, _ := os.ReadFile(f)
		if strings.HasSuffix(f, "nexo.io_nexoproxies.yaml") {
			var obj map[string]any
			if err := yaml.Unmarshal(raw, &obj); err != nil {
				t.Fatal(err)
			}
			spec := obj["spec"].(map[string]any)["versions"].([]any)[0].(map[string]any)["schema"].(map[string]any)["openAPIV3Schema"].(map[string]any)["properties"].(map[string]any)["spec"].(map[string]any)["properties"].(map[string]any)
			delete(spec, "proxyImage")
			raw, _ = yaml.Marshal(obj)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(f)), raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, _, code = run(t, "", "schema", "diff", "build", dir, "-o", "json")
	var r schemadiff.Report
	if err := json.Unmarshal([]byte(out), &r); code != 0 || err != nil || len(r.Changes) != 1 ||
		r.Changes[0].Rule != "existingFieldRemoval" || r.Changes[0].Path != "spec.proxyImage" || r.Changes[0].Severity != schemadiff.Breaking {
		t.Errorf("json: %d %v %s", code, err, out)
	}
	out, _, _ = run(t, "", "schema", "diff", "build", dir, "-o", "markdown")
	if !strings.Contains(out, "| breaking | NexoProxy v1alpha1 spec.proxyImage | `existingFieldRemoval` |") {
		t.Errorf("markdown:\n%s", out)
	}
	out, _, _ = run(t, "", "schema", "diff", dir, "build")
	if !strings.Contains(out, "safe") || !strings.Contains(out, "spec.proxyImage [fieldAdded]") {
		t.Errorf("text:\n%s", out)
	}
	_, errOut, code = run(t, "", "schema", "diff", "nosuch", "build")
	if code != 2 || !strings.Contains(errOut, `(or "cluster", or "build")`) {
		t.Errorf("a bad source: %d %q", code, errOut)
	}
}
