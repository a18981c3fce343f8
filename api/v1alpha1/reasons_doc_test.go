package v1alpha1_test

import (
	"os"
	"regexp"
	"testing"
)

// Every condition reason that says something is wrong or pending has a section in
// docs/troubleshooting.md, where a person looks it up.
func TestEveryReasonIsDocumented(t *testing.T) {
	src, err := os.ReadFile("conditions.go")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../../docs/troubleshooting.md")
	if err != nil {
		t.Fatal(err)
	}
	fine := map[string]bool{"Valid": true, "Passed": true, "Signed": true, "Available": true}
	reasons := regexp.MustCompile(`Reason\w+\s*=\s*"(\w+)"`).FindAllStringSubmatch(string(src), -1)
	if len(reasons) < 20 {
		t.Fatalf("found %d reasons in conditions.go", len(reasons))
	}
	for _, r := range reasons {
		if !fine[r[1]] && !regexp.MustCompile(`(?m)^### `+r[1]+`$`).Match(doc) {
			t.Errorf("reason %s has no section in docs/troubleshooting.md", r[1])
		}
	}
}
