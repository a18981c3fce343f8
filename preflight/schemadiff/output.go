package schemadiff

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/nexo-io/nexo-edge/catalog"
)

// severities in the order a reader needs them.
var severities = []Severity{Breaking, Risky, Safe}

// Summary is one line: how many changes of each severity.
func (r Report) Summary() string {
	if len(r.Changes) == 0 {
		return "no schema changes"
	}
	return fmt.Sprintf("%d breaking, %d risky, %d safe", r.Count(Breaking), r.Count(Risky), r.Count(Safe))
}

// where names a change's place: Kind, Kind version, or Kind version path.
func (c Change) where() string {
	return strings.TrimSpace(strings.Join([]string{c.Kind, c.Version, c.Path}, " "))
}

// WriteText writes the report for a terminal, breaking first.
func (r Report) WriteText(w io.Writer) {
	fmt.Fprintf(w, "Schema changes %s → %s: %s\n", r.Old, r.New, r.Summary())
	for _, s := range severities {
		for _, c := range r.Changes {
			if c.Severity != s {
				continue
			}
			fmt.Fprintf(w, "  %-8s %s [%s] %s\n", s, c.where(), c.Rule, c.Change)
			if c.Migration != "none" {
				fmt.Fprintf(w, "           migration: %s\n", c.Migration)
			}
			if c.Rollback != "none" {
				fmt.Fprintf(w, "           rollback: %s\n", c.Rollback)
			}
		}
	}
}

// Markdown is the report as the schema section of release notes: the summary, the kinds added
// or removed and the support changes in words, then every change in a table, breaking first.
func (r Report) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Schema changes from %s to %s: %s.\n", r.Old, r.New, r.Summary())
	for _, g := range []struct{ rule, title string }{{"kindAdded", "Kinds added"}, {"kindRemoved", "Kinds removed"}, {"supportChange", "Support changes"}} {
		var items []string
		for _, c := range r.Changes {
			if c.Rule == g.rule {
				items = append(items, c.Kind+" ("+strings.TrimSuffix(strings.TrimPrefix(c.Change, "kind added ("), ")")+")")
			}
		}
		if len(items) > 0 {
			fmt.Fprintf(&b, "\n%s: %s.\n", g.title, strings.Join(items, ", "))
		}
	}
	// Added kinds need nothing more than their names; every other change gets a row.
	var rows []Change
	for _, c := range r.Changes {
		if c.Rule != "kindAdded" {
			rows = append(rows, c)
		}
	}
	if len(rows) == 0 {
		b.WriteString("\nNo migration is needed, and nothing constrains a rollback.\n")
		return b.String()
	}
	b.WriteString("\n| severity | where | rule | change | migration | rollback |\n|---|---|---|---|---|---|\n")
	cell := func(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
	for _, s := range severities {
		for _, c := range rows {
			if c.Severity == s {
				fmt.Fprintf(&b, "| %s | %s | `%s` | %s | %s | %s |\n", s, cell(c.where()), c.Rule, cell(c.Change), cell(c.Migration), cell(c.Rollback))
			}
		}
	}
	return b.String()
}

// LoadDir reads the nexo.io CRDs of a folder, by kind: a release folder (its crds/), a bundle
// folder (its manifests/) or a folder of CRD files.
func LoadDir(dir string) (map[string]*apiextensionsv1.CustomResourceDefinition, error) {
	st, err := os.Stat(dir)
	if err != nil {
		return nil, err
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("%s is not a folder (want a release folder, a bundle folder or a folder of CRDs)", dir)
	}
	for _, sub := range []string{"crds", "manifests"} {
		if st, err := os.Stat(filepath.Join(dir, sub)); err == nil && st.IsDir() {
			dir = filepath.Join(dir, sub)
			break
		}
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	out := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var meta struct{ Kind string }
		if err := yaml.Unmarshal(raw, &meta); err != nil || meta.Kind != "CustomResourceDefinition" {
			continue
		}
		c := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(raw, c); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		if c.Spec.Group == catalog.Group {
			out[c.Spec.Names.Kind] = c
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s holds no %s CRDs (want a release folder, a bundle folder or a folder of CRDs)", dir, catalog.Group)
	}
	return out, nil
}
