package preflight

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Check ids are what JSON consumers and the troubleshooting page key on: unique, present, and
// each has a section in docs/troubleshooting.md; hints are runnable (no <placeholder>).
func TestCheckIDsAreStableAndDocumented(t *testing.T) {
	// go test runs in the package's folder.
	doc, err := os.ReadFile(filepath.Join("..", "docs", "troubleshooting.md"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]string{}
	for _, cats := range [][]Category{ClusterCategories(false), ClusterCategories(true), OfflineCategories()} {
		for _, cat := range cats {
			for _, c := range cat.Checks {
				if c.ID == "" || strings.ContainsAny(c.ID, " .") {
					t.Errorf("check %q has no usable id (%q)", c.Description, c.ID)
				}
				if d, ok := seen[c.ID]; ok && d != c.Description {
					t.Errorf("id %s names two checks: %q and %q", c.ID, d, c.Description)
				}
				seen[c.ID] = c.Description
				if strings.Contains(c.Hint, "<") {
					t.Errorf("check %s: the hint %q has a placeholder to fill in", c.ID, c.Hint)
				}
				if !strings.Contains(string(doc), "\n### "+c.ID+"\n") {
					t.Errorf("docs/troubleshooting.md has no section ### %s", c.ID)
				}
			}
		}
	}
}
