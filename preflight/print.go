package preflight

import (
	"fmt"
	"io"
	"strings"

	"charm.land/lipgloss/v2"
)

// Glyphs of a check's status.
var glyphs = map[Status]string{OK: "✔", Warning: "‼", Error: "×", Skipped: "-"}

// PrintText writes a report the way linkerd check does: a header per category, one line per
// check, details and a hint under each check that did not pass, then a one-line verdict.
// Colour is applied only when color is true (a terminal without NO_COLOR).
func PrintText(w io.Writer, r Report, color bool) {
	style := func(s Status, text string) string {
		if !color {
			return text
		}
		c := map[Status]string{OK: "2", Warning: "3", Error: "1", Skipped: "8"}[s]
		return lipgloss.NewStyle().Foreground(lipgloss.Color(c)).Render(text)
	}
	for i, cat := range r.Categories {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fmt.Fprintln(w, cat.Name)
		fmt.Fprintln(w, strings.Repeat("-", len(cat.Name)))
		for _, c := range cat.Checks {
			line := glyphs[c.Status] + " " + c.Description
			if c.Message != "" {
				line += ": " + c.Message
			}
			fmt.Fprintln(w, style(c.Status, line))
			for _, d := range c.Details {
				fmt.Fprintln(w, "    "+d)
			}
			if c.Hint != "" {
				fmt.Fprintln(w, "    hint: "+c.Hint)
			}
			if c.Docs != "" {
				fmt.Fprintln(w, "    docs: "+c.Docs)
			}
		}
	}
	fmt.Fprintln(w)
	switch r.Status {
	case Error:
		fmt.Fprintln(w, style(Error, fmt.Sprintf("Status check results are × (%d errors, %d warnings)", r.Errors, r.Warnings)))
	case Warning:
		fmt.Fprintln(w, style(Warning, fmt.Sprintf("Status check results are ‼ (%d warnings)", r.Warnings)))
	default:
		fmt.Fprintln(w, style(OK, "Status check results are ✔"))
	}
}
