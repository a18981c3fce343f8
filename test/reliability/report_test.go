package reliability_test

import (
	"encoding/json"
	"os"
	"testing"
)

// figure records one line of the reliability report: the suite, what was measured, its value.
// With NEXO_RELIABILITY_REPORT set (make test-reliability), the line is appended there as JSON;
// hack/reliability-report prints the table.
func figure(t *testing.T, what, value string) {
	t.Helper()
	t.Logf("figure: %s: %s", what, value)
	path := os.Getenv("NEXO_RELIABILITY_REPORT")
	if path == "" {
		return
	}
	line, _ := json.Marshal(map[string]string{"suite": t.Name(), "what": what, "value": value})
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Errorf("report: %v", err)
		return
	}
	defer f.Close()
	if _, err := f.Write(append(line, '\n')); err != nil {
		t.Errorf("report: %v", err)
	}
}
