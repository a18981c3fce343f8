package packaging_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/nexo-io/nexo-edge/test/framework/testcluster"
)

// TestDocsLinksStayInTheRepository: every link of the README, the CHANGELOG and docs/ points at
// a file of this repository that exists (no link outside it, none broken).
func TestDocsLinksStayInTheRepository(t *testing.T) {
	root := testcluster.RepoRoot()
	pages, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	pages = append(pages, filepath.Join(root, "README.md"), filepath.Join(root, "CHANGELOG.md"))
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for _, page := range pages {
		raw, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(raw), -1) {
			target, _, _ := strings.Cut(m[1], "#")
			if target == "" || strings.HasPrefix(target, "https://github.com/nexo-io/nexo-edge/") {
				continue
			}
			if strings.Contains(target, "://") {
				t.Errorf("%s links outside the repository: %s", filepath.Base(page), m[1])
				continue
			}
			abs := filepath.Clean(filepath.Join(filepath.Dir(page), target))
			if rel, err := filepath.Rel(root, abs); err != nil || strings.HasPrefix(rel, "..") {
				t.Errorf("%s links outside the repository: %s", filepath.Base(page), m[1])
			} else if _, err := os.Stat(abs); err != nil {
				t.Errorf("%s links to %s, which does not exist", filepath.Base(page), m[1])
			}
		}
	}
}
