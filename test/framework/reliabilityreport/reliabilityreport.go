// Package reliabilityreport records the figures the reliability suites measure (faults injected,
// end states compared, takeover and recovery times, secrets found) and prints them as the table
// make test-reliability ends with. Tests call Figure; with $NEXO_RELIABILITY_REPORT set, each
// figure is appended there as one JSON line; Table reads the lines back.
package reliabilityreport

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
)

// EnvVar names the file figures are appended to.
const EnvVar = "NEXO_RELIABILITY_REPORT"

// Row is one figure: the test that measured it, what, and the value.
type Row struct {
	Suite string `json:"suite"`
	What  string `json:"what"`
	Value string `json:"value"`
}

// Figure logs a figure and, when EnvVar is set, appends it to the report.
func Figure(t testing.TB, what, value string) {
	t.Helper()
	t.Logf("figure: %s: %s", what, value)
	if err := Append(os.Getenv(EnvVar), Row{Suite: t.Name(), What: what, Value: value}); err != nil {
		t.Errorf("reliability report: %v", err)
	}
}

// Append adds a row to the report at path ("" does nothing).
func Append(path string, r Row) error {
	if path == "" {
		return nil
	}
	line, err := json.Marshal(r)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.Write(append(line, '\n'))
	return err
}

// Read parses a report.
func Read(r io.Reader) ([]Row, error) {
	var rows []Row
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var row Row
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			return nil, fmt.Errorf("report line %q: %w", sc.Text(), err)
		}
		rows = append(rows, row)
	}
	return rows, sc.Err()
}

// Table writes the rows as a Markdown table, in the order they were recorded.
func Table(w io.Writer, rows []Row) {
	fmt.Fprintln(w, "| suite | what | figure |")
	fmt.Fprintln(w, "|---|---|---|")
	esc := strings.NewReplacer("|", `\|`, "\n", " ")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %s | %s |\n", esc.Replace(r.Suite), esc.Replace(r.What), esc.Replace(r.Value))
	}
}
