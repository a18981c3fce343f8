package main

import (
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// The monitoring sources (config/monitoring): the alerts as a Prometheus rule file, which
// promtool tests, and the Grafana dashboard.
const (
	alertsFile    = "config/monitoring/alerts.yaml"
	dashboardFile = "config/monitoring/dashboard.json"
	// ruleName names the PrometheusRule on every path.
	ruleName = "nexo-edge"
)

// prometheusRule wraps the rule file's groups in a PrometheusRule (monitoring.coreos.com/v1);
// namespace "" for the bundle, where OLM sets it.
func prometheusRule(namespace string) (map[string]any, error) {
	raw, err := os.ReadFile(alertsFile)
	if err != nil {
		return nil, err
	}
	var rules struct {
		Groups []any `json:"groups"`
	}
	if err := yaml.UnmarshalStrict(raw, &rules); err != nil {
		return nil, fmt.Errorf("%s: %w", alertsFile, err)
	}
	meta := map[string]any{"name": ruleName, "labels": map[string]any{"app.kubernetes.io/part-of": "nexo-edge"}}
	if namespace != "" {
		meta["namespace"] = namespace
	}
	return map[string]any{
		"apiVersion": "monitoring.coreos.com/v1",
		"kind":       "PrometheusRule",
		"metadata":   meta,
		"spec":       map[string]any{"groups": rules.Groups},
	}, nil
}

// monitoring writes config/monitoring/prometheusrule.yaml for kustomize and copies the rule file
// and the dashboard into the chart's files/, which its templates read with .Files.Get (so Helm
// never reads the alerts' own {{ }} templates as its own).
func monitoring() error {
	rule, err := prometheusRule("nexo-system")
	if err != nil {
		return err
	}
	if err := writeYAML("config/monitoring/prometheusrule.yaml",
		generatedHeader+"# The alerts of alerts.yaml as a PrometheusRule (prometheus-operator).\n", rule); err != nil {
		return err
	}
	files := filepath.Join(chartDir, "files")
	if err := os.MkdirAll(files, 0o755); err != nil {
		return err
	}
	for _, f := range []string{alertsFile, dashboardFile} {
		raw, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(files, filepath.Base(f)), raw, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// metricsServices are the operator's and the Manager's metrics Services of config/, without a
// namespace, for the bundle: OLM creates them beside the Deployments, whose pods they select.
func metricsServices() ([]*corev1.Service, error) {
	var out []*corev1.Service
	for _, path := range []string{"config/operator/operator.yaml", "config/manager/manager.yaml"} {
		ds, err := docs(path)
		if err != nil {
			return nil, err
		}
		for _, d := range ds {
			svc := &corev1.Service{}
			if err := yaml.Unmarshal(d, svc); err != nil || svc.Kind != "Service" {
				continue
			}
			if err := yaml.UnmarshalStrict(d, svc); err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			svc.Namespace = ""
			out = append(out, svc)
		}
	}
	if len(out) != 2 {
		return nil, fmt.Errorf("want the operator's and the Manager's metrics Services in config/, found %d", len(out))
	}
	return out, nil
}
