package packaging_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/nexo-io/nexo-edge/test/framework/testcluster"
)

// TestNoEarlyExitPipes: no script CI runs pipes into a reader that may stop reading early
// (grep -q, grep -m, head). Under `set -o pipefail` the writer then dies of SIGPIPE when it writes
// after the reader exited, and the pipeline fails although the reader found what it looked for:
// a check that fails only on a slow or cold machine. Capture the output first, then match it.
func TestNoEarlyExitPipes(t *testing.T) {
	root := testcluster.RepoRoot()
	scripts, _ := filepath.Glob(filepath.Join(root, "hack", "*.sh"))
	scripts = append(scripts, filepath.Join(root, ".ci", "run"), filepath.Join(root, "Makefile"))
	early := regexp.MustCompile(`\|\s*(grep\s+(-[A-Za-z]*[qm]|--quiet|--max-count)|head\b)`)
	for _, path := range scripts {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		// Join continuation lines, so a pipe split over two lines is one command.
		text := strings.ReplaceAll(string(raw), "\\\n", " ")
		for i, line := range strings.Split(text, "\n") {
			if code, _, _ := strings.Cut(line, "#"); early.MatchString(code) {
				t.Errorf("%s: line %d pipes into a reader that exits early (SIGPIPE under pipefail); capture the output, then match it: %s",
					filepath.Base(path), i+1, strings.TrimSpace(line))
			}
		}
	}
}
