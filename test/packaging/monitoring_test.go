package packaging_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/nexo-io/nexo-edge/test/framework/monitoring"
	"github.com/nexo-io/nexo-edge/test/framework/testcluster"
)

var monitoringDir = monitoring.Dir

func readAlerts(t *testing.T) monitoring.RuleFile {
	t.Helper()
	f, err := monitoring.Alerts()
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestAlertsPassPromtool: promtool checks the rule file and runs its unit tests
// (config/monitoring/alerts_test.yaml), in which every alert fires on series named and labelled
// as the operator and the Manager export them and stays quiet when they are healthy.
func TestAlertsPassPromtool(t *testing.T) {
	promtool := filepath.Join(testcluster.RepoRoot(), "bin", "promtool")
	if _, err := os.Stat(promtool); err != nil {
		t.Fatalf("bin/promtool missing: run make cluster-tools (%v)", err)
	}
	for _, args := range [][]string{{"check", "rules", "alerts.yaml"}, {"test", "rules", "alerts_test.yaml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = monitoringDir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// TestEveryAlertIsTestedAndHasARunbook: each alert has a severity, a runbook section of
// docs/troubleshooting.md, reads only the jobs the monitors name, and has promtool cases in
// which it fires and in which it does not.
func TestEveryAlertIsTestedAndHasARunbook(t *testing.T) {
	alerts := readAlerts(t)
	raw, err := os.ReadFile(filepath.Join(monitoringDir, "alerts_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string           `json:"alertname"`
				ExpAlerts []map[string]any `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	if err := yaml.Unmarshal(raw, &tests); err != nil {
		t.Fatal(err)
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				quiet[a.Alertname] = true
			}
		}
	}
	troubleshooting, err := os.ReadFile(filepath.Join(testcluster.RepoRoot(), "docs", "troubleshooting.md"))
	if err != nil {
		t.Fatal(err)
	}
	jobs := regexp.MustCompile(`job="([^"]*)"`)
	n := 0
	for _, g := range alerts.Groups {
		for _, r := range g.Rules {
			n++
			if !fires[r.Alert] || !quiet[r.Alert] {
				t.Errorf("%s: alerts_test.yaml has a case where it fires: %v, and one where it does not: %v", r.Alert, fires[r.Alert], quiet[r.Alert])
			}
			if s := r.Labels["severity"]; s != "critical" && s != "warning" {
				t.Errorf("%s: severity %q, want critical or warning", r.Alert, s)
			}
			want := "https://github.com/nexo-io/nexo-edge/blob/main/docs/troubleshooting.md#" + strings.ToLower(r.Alert)
			if r.Annotations["runbook_url"] != want {
				t.Errorf("%s: runbook_url %q, want %s", r.Alert, r.Annotations["runbook_url"], want)
			}
			if !strings.Contains(string(troubleshooting), "\n### "+r.Alert+"\n") {
				t.Errorf("%s: docs/troubleshooting.md has no section \"### %s\" (its runbook)", r.Alert, r.Alert)
			}
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				t.Errorf("%s: no summary or description", r.Alert)
			}
			for _, m := range jobs.FindAllStringSubmatch(r.Expr, -1) {
				if m[1] != "nexo-operator" && m[1] != "nexo-manager" {
					t.Errorf("%s reads job=%q; the monitors set job to app.kubernetes.io/name (nexo-operator, nexo-manager)", r.Alert, m[1])
				}
			}
		}
	}
	if n < 7 {
		t.Errorf("alerts.yaml has %d alerts, want at least the 7 of docs/monitoring.md", n)
	}
}

// TestDashboardReadsTheExportedMetrics: the dashboard is valid JSON with a datasource variable
// and unique panel ids. The series it and the alerts read (monitoring.Series) are checked against
// the real operator's and Manager's /metrics by the end-to-end test.
func TestDashboardReadsTheExportedMetrics(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(monitoringDir, "dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		UID    string `json:"uid"`
		Title  string `json:"title"`
		Panels []struct {
			ID         int    `json:"id"`
			Type       string `json:"type"`
			Title      string `json:"title"`
			Datasource struct {
				UID string `json:"uid"`
			} `json:"datasource"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	if d.UID == "" || d.Title == "" {
		t.Error("the dashboard has no uid or title")
	}
	ids := map[int]bool{}
	queries := 0
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d twice", p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			continue
		}
		if p.Datasource.UID != "${datasource}" || len(p.Targets) == 0 {
			t.Errorf("panel %q: datasource %q and %d queries, want ${datasource} and at least one", p.Title, p.Datasource.UID, len(p.Targets))
		}
		queries += len(p.Targets)
	}
	if queries < 10 {
		t.Errorf("the dashboard has %d queries", queries)
	}
	series, err := monitoring.Series()
	if err != nil {
		t.Fatal(err)
	}
	if len(series) < 10 || !slices.Contains(series, "up") || !slices.Contains(series, "nexo_proxies") {
		t.Errorf("the alerts and the dashboard read %v", series)
	}
}

// TestMonitoringShipsOnEveryPath: kustomize (config/monitoring), the chart (metrics.serviceMonitor
// or podMonitor, prometheusRule, dashboard) and the OLM bundle ship the same alerts; each object
// decodes strictly into prometheus-operator's types and is accepted by a real API server with
// prometheus-operator's CRDs under strict field validation; the monitors set the job label the
// alerts read, and the bundle's metrics Services select the pods of the CSV's Deployments.
func TestMonitoringShipsOnEveryPath(t *testing.T) {
	alerts := readAlerts(t)

	var objs []*unstructured.Unstructured
	add := func(where string, raw []byte) {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(raw, &u.Object); err != nil {
			t.Fatalf("%s: %v", where, err)
		}
		if u.GetNamespace() == "" && u.GetKind() != "ClusterRole" {
			u.SetNamespace("nexo-system") // OLM's: the operator's namespace
		}
		u.SetLabels(map[string]string{"path": where})
		objs = append(objs, u)
		switch u.GetKind() {
		case "PrometheusRule":
			r := &monitoringv1.PrometheusRule{}
			if err := yaml.UnmarshalStrict(raw, r); err != nil {
				t.Errorf("%s: the PrometheusRule does not decode strictly: %v", where, err)
			}
			if len(r.Spec.Groups) != 1 || r.Spec.Groups[0].Rules[0].Alert != alerts.Groups[0].Rules[0].Alert || len(r.Spec.Groups[0].Rules) != len(alerts.Groups[0].Rules) {
				t.Errorf("%s: the PrometheusRule's rules differ from alerts.yaml", where)
			}
			for i, rule := range r.Spec.Groups[0].Rules {
				if src := alerts.Groups[0].Rules[i]; rule.Expr.String() != src.Expr || string(*rule.For) != src.For || rule.Annotations["description"] != src.Annotations["description"] {
					t.Errorf("%s: rule %s differs from alerts.yaml", where, rule.Alert)
				}
			}
		case "ServiceMonitor":
			m := &monitoringv1.ServiceMonitor{}
			if err := yaml.UnmarshalStrict(raw, m); err != nil {
				t.Errorf("%s: the ServiceMonitor does not decode strictly: %v", where, err)
			}
			if m.Spec.JobLabel != "app.kubernetes.io/name" {
				t.Errorf("%s: ServiceMonitor %s jobLabel %q, want app.kubernetes.io/name", where, m.Name, m.Spec.JobLabel)
			}
		case "PodMonitor":
			m := &monitoringv1.PodMonitor{}
			if err := yaml.UnmarshalStrict(raw, m); err != nil {
				t.Errorf("%s: the PodMonitor does not decode strictly: %v", where, err)
			}
			if m.Spec.JobLabel != "app.kubernetes.io/name" || len(m.Spec.PodMetricsEndpoints) != 1 || m.Spec.PodMetricsEndpoints[0].Authorization == nil {
				t.Errorf("%s: PodMonitor %s: jobLabel %q and endpoints %+v, want app.kubernetes.io/name and one authorized endpoint", where, m.Name, m.Spec.JobLabel, m.Spec.PodMetricsEndpoints)
			}
		}
	}

	// kustomize
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), monitoringDir)
	if err != nil {
		t.Fatalf("kustomize build config/monitoring: %v", err)
	}
	dashboard, err := os.ReadFile(filepath.Join(monitoringDir, "dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, r := range res.Resources() {
		raw, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		kinds[r.GetKind()]++
		add("kustomize", raw)
		if r.GetKind() == "ConfigMap" {
			cm := &corev1.ConfigMap{}
			if err := yaml.Unmarshal(raw, cm); err != nil || cm.Data["nexo-edge.json"] != string(dashboard) || cm.Labels["grafana_dashboard"] != "1" {
				t.Errorf("kustomize: the dashboard ConfigMap does not hold dashboard.json with grafana_dashboard: \"1\" (%v)", err)
			}
		}
	}
	if kinds["PrometheusRule"] != 1 || kinds["ConfigMap"] != 1 {
		t.Errorf("kustomize build config/monitoring: %v, want a PrometheusRule and the dashboard ConfigMap", kinds)
	}

	// the chart, with each monitor
	for _, v := range []string{
		"metrics: {serviceMonitor: {enabled: true, tokenSecret: {name: scraper}}, prometheusRule: {enabled: true}, dashboard: {enabled: true}}",
		"metrics: {podMonitor: {enabled: true, tokenSecret: {name: scraper}}, certSecret: metrics-tls}",
	} {
		docs, err := render(t, v+"\n")
		if err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		for key, raw := range docs {
			switch strings.Split(key, "/")[0] {
			case "PrometheusRule", "ServiceMonitor", "PodMonitor":
				add("chart", raw)
			case "ConfigMap":
				if strings.HasSuffix(key, "/nexo-edge-dashboard") {
					add("chart", raw)
					cm := &corev1.ConfigMap{}
					if err := yaml.Unmarshal(raw, cm); err != nil || strings.TrimSpace(cm.Data["nexo-edge.json"]) != strings.TrimSpace(string(dashboard)) {
						t.Errorf("chart: the dashboard ConfigMap does not hold dashboard.json (%v)", err)
					}
				}
			}
		}
	}

	// the bundle
	bundleDir := filepath.Join(testcluster.RepoRoot(), "bundle", "manifests")
	csv := loadBundle(t, filepath.Join(testcluster.RepoRoot(), "bundle")).CSV
	for _, f := range []string{"nexo-edge_monitoring.coreos.com_v1_prometheusrule.yaml", "nexo-operator-metrics_v1_service.yaml", "nexo-manager-metrics_v1_service.yaml"} {
		raw, err := os.ReadFile(filepath.Join(bundleDir, f))
		if err != nil {
			t.Fatalf("the bundle has no %s: %v", f, err)
		}
		add("bundle", raw)
		if strings.HasSuffix(f, "_service.yaml") {
			svc := &corev1.Service{}
			if err := yaml.UnmarshalStrict(raw, svc); err != nil {
				t.Fatal(err)
			}
			selects := false
			for _, d := range csv.Spec.InstallStrategy.StrategySpec.DeploymentSpecs {
				match := len(svc.Spec.Selector) > 0
				for k, v := range svc.Spec.Selector {
					match = match && d.Spec.Template.Labels[k] == v
				}
				ports := false
				for _, c := range d.Spec.Template.Spec.Containers {
					for _, p := range c.Ports {
						ports = ports || p.Name == svc.Spec.Ports[0].TargetPort.String()
					}
				}
				selects = selects || (match && ports && svc.Labels["app.kubernetes.io/name"] == d.Name)
			}
			if !selects {
				t.Errorf("the bundle's Service %s selects no CSV Deployment's pods by their metrics port, or is not labelled with its app.kubernetes.io/name", svc.Name)
			}
		}
	}

	// A real API server with prometheus-operator's CRDs accepts every object under strict field
	// validation.
	docs := map[string][]byte{}
	for _, u := range objs {
		raw, err := yaml.Marshal(u.Object)
		if err != nil {
			t.Fatal(err)
		}
		docs[fmt.Sprintf("%s: %s/%s (%d)", u.GetLabels()["path"], u.GetKind(), u.GetName(), len(docs))] = raw
	}
	accepts := strictAPIServer(t)
	for _, key := range slices.Sorted(maps.Keys(docs)) {
		if err := accepts(docs[key]); err != nil {
			t.Errorf("%s: the API server refuses it under strict field validation: %v", key, err)
		}
	}
	t.Logf("%d monitoring objects checked by the API server", len(docs))
	// The check can fail: a field prometheus-operator's schema does not have is refused.
	bad := "apiVersion: monitoring.coreos.com/v1\nkind: PrometheusRule\nmetadata: {name: typo, namespace: nexo-system}\nspec:\n  groups:\n  - name: g\n    rules:\n    - alert: A\n      expr: up == 0\n      for_: 5m\n"
	if err := accepts([]byte(bad)); err == nil || !strings.Contains(err.Error(), "for_") {
		t.Errorf("a PrometheusRule with an unknown field: %v, want it refused naming the field", err)
	}
}
