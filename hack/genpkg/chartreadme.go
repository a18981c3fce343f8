package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	yamlv3 "gopkg.in/yaml.v3"

	"github.com/nexo-io/nexo-edge/catalog"
)

// valueRow is one leaf of values.yaml in the chart README's table.
type valueRow struct{ Path, Default, Meaning string }

// chartREADME writes the chart's README from its template and values.yaml: one table row per
// leaf (an empty map or list is a leaf), with its default and the comment above it (else above
// the nearest key that has one, for keys such as image.tag), so the table cannot drift from the
// values the chart takes.
func chartREADME() error {
	raw, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		return err
	}
	var doc yamlv3.Node
	if err := yamlv3.Unmarshal(raw, &doc); err != nil {
		return fmt.Errorf("values.yaml: %w", err)
	}
	var rows []valueRow
	if len(doc.Content) == 1 {
		if err := valueRows(doc.Content[0], "", "", &rows); err != nil {
			return err
		}
	}
	return writeTemplate(filepath.Join(chartDir, "README.md"), "chart-readme.md", map[string]any{
		"Version": catalog.BuildVersion, "Kinds": len(catalog.Kinds), "Rows": rows, "Chart": catalog.ChartReference,
	})
}

func valueRows(n *yamlv3.Node, prefix, inherited string, rows *[]valueRow) error {
	if n.Kind != yamlv3.MappingNode || len(n.Content) == 0 {
		flow := *n
		flow.Style |= yamlv3.FlowStyle
		flow.HeadComment, flow.LineComment, flow.FootComment = "", "", ""
		def, err := yamlv3.Marshal(&flow)
		if err != nil {
			return err
		}
		*rows = append(*rows, valueRow{Path: prefix, Default: strings.TrimSpace(string(def)), Meaning: inherited})
		return nil
	}
	prevLine, prevMeaning := -1, ""
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, val := n.Content[i], n.Content[i+1]
		path := key.Value
		if prefix != "" {
			path = prefix + "." + key.Value
		}
		meaning := comment(key.HeadComment)
		switch {
		case meaning != "":
		case key.Line == prevLine+1 && prevMeaning != "":
			meaning = prevMeaning // a group: keys on the lines right after a commented one
		default:
			meaning = inherited
		}
		if err := valueRows(val, path, meaning, rows); err != nil {
			return err
		}
		prevLine, prevMeaning = lastLine(val), meaning
		if meaning == inherited {
			prevMeaning = ""
		}
	}
	return nil
}

// lastLine is the last line a value spans (a nested map or block list ends below its key).
func lastLine(n *yamlv3.Node) int {
	last := n.Line
	for _, c := range n.Content {
		last = max(last, lastLine(c))
	}
	return last
}

// comment joins a YAML head comment's lines into one sentence for a table cell.
func comment(c string) string {
	var words []string
	for _, line := range strings.Split(c, "\n") {
		line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "#"))
		if line != "" {
			words = append(words, line)
		}
	}
	return strings.ReplaceAll(strings.Join(words, " "), "|", "\\|")
}
