package monitoring

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"

	"sigs.k8s.io/yaml"

	"github.com/nexo-io/nexo-edge/test/framework/testcluster"
)

// Dir is config/monitoring.
var Dir = filepath.Join(testcluster.RepoRoot(), "config", "monitoring")

// seriesName matches a series selector in PromQL: a name followed by its label matchers (every
// query of the alerts and the dashboard names its job).
var seriesName = regexp.MustCompile(`\b(up|nexo_[a-z_]+|controller_runtime_[a-z_]+|workqueue_[a-z_]+)\{`)

// RuleFile is alerts.yaml as promtool reads it.
type RuleFile struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert       string            `json:"alert"`
			Expr        string            `json:"expr"`
			For         string            `json:"for"`
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
		} `json:"rules"`
	} `json:"groups"`
}

// Alerts reads alerts.yaml, strictly.
func Alerts() (RuleFile, error) {
	var f RuleFile
	raw, err := os.ReadFile(filepath.Join(Dir, "alerts.yaml"))
	if err != nil {
		return f, err
	}
	return f, yaml.UnmarshalStrict(raw, &f)
}

// Series are the names of the series the alerts (alerts.yaml) and the dashboard (dashboard.json)
// read, sorted.
func Series() ([]string, error) {
	f, err := Alerts()
	if err != nil {
		return nil, err
	}
	var text []string
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			text = append(text, r.Expr)
		}
	}
	dashboard, err := os.ReadFile(filepath.Join(Dir, "dashboard.json"))
	if err != nil {
		return nil, err
	}
	text = append(text, string(dashboard))
	var out []string
	for _, s := range text {
		for _, m := range seriesName.FindAllStringSubmatch(s, -1) {
			if !slices.Contains(out, m[1]) {
				out = append(out, m[1])
			}
		}
	}
	slices.Sort(out)
	return out, nil
}
