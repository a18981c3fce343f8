package reliabilityreport

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFiguresRoundTripIntoATable(t *testing.T) {
	path := filepath.Join(t.TempDir(), "report.jsonl")
	t.Setenv(EnvVar, path)
	Figure(t, "kills", "10 | seed 7")
	if err := Append(path, Row{Suite: "fuzz", What: "FuzzRender executions", Value: "19035"}); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := Read(f)
	if err != nil || len(rows) != 2 || rows[0].Suite != t.Name() || rows[1].Value != "19035" {
		t.Fatalf("rows %+v, %v", rows, err)
	}
	var b bytes.Buffer
	Table(&b, rows)
	if !strings.Contains(b.String(), `| 10 \| seed 7 |`) || strings.Count(b.String(), "\n") != 4 {
		t.Errorf("table:\n%s", b.String())
	}
	if _, err := Read(strings.NewReader("{broken")); err == nil {
		t.Error("a broken line was read")
	}
}
