package main

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/nexo-io/nexo-edge/catalog"
)

// bundleAnnotations are the registry+v1 bundle's metadata/annotations.yaml, which the bundle
// image repeats as labels.
func bundleAnnotations() map[string]string {
	return map[string]string{
		"operators.operatorframework.io.bundle.mediatype.v1":       "registry+v1",
		"operators.operatorframework.io.bundle.manifests.v1":       "manifests/",
		"operators.operatorframework.io.bundle.metadata.v1":        "metadata/",
		"operators.operatorframework.io.bundle.package.v1":         packageName,
		"operators.operatorframework.io.bundle.channels.v1":        strings.Join(catalog.Channels(catalog.BuildVersion), ","),
		"operators.operatorframework.io.bundle.channel.default.v1": catalog.DefaultChannel(catalog.BuildVersion),
		"operators.operatorframework.io.test.mediatype.v1":         "scorecard+v1",
		"operators.operatorframework.io.test.config.v1":            "tests/scorecard/",
		"com.redhat.openshift.versions":                            openShiftVersions(),
	}
}

// bundle writes bundle/ (the CSV, the CRDs, the unbound roles, the metrics Services and the
// PrometheusRule, metadata and the scorecard configuration) through a temp dir, bundle.Dockerfile, and then the
// catalog files (olmcatalog.go).
func bundle() error {
	tmp, err := os.MkdirTemp("", "nexo-bundle-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	manifests := filepath.Join(tmp, "manifests")
	metadata := filepath.Join(tmp, "metadata")
	scorecard := filepath.Join(tmp, "tests", "scorecard")
	for _, d := range []string{manifests, metadata, scorecard} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	files, err := crdFiles()
	if err != nil {
		return err
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(manifests, filepath.Base(f)), raw, 0o644); err != nil {
			return err
		}
	}
	rules, err := rbacRules()
	if err != nil {
		return err
	}
	csv, err := buildCSV(rules)
	if err != nil {
		return err
	}
	if err := writeYAML(filepath.Join(manifests, packageName+".clusterserviceversion.yaml"), "", csv); err != nil {
		return err
	}
	// Shipped unbound: an admin binds it with a RoleBinding in each namespace whose proxies may
	// receive pull-Secret copies (docs/rbac.md). OLM would grant CSV rules cluster-wide.
	if err := writeYAML(filepath.Join(manifests, "nexo-operator-secret-copies_rbac.authorization.k8s.io_v1_clusterrole.yaml"), "",
		role("nexo-operator-secret-copies", "", rules.secretCopies, nil)); err != nil {
		return err
	}
	// Shipped unbound too: whoever scrapes the operator's authenticated metrics gets it bound.
	if err := writeYAML(filepath.Join(manifests, "nexo-operator-metrics-reader_rbac.authorization.k8s.io_v1_clusterrole.yaml"), "",
		role("nexo-operator-metrics-reader", "", []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}, nil)); err != nil {
		return err
	}
	// The metrics Services, so an OLM installation can be scraped (docs/monitoring.md),
	// and the alerts: OLM creates them in the operator's namespace. The PrometheusRule needs
	// prometheus-operator's CRD, which every OpenShift has (docs/monitoring.md).
	services, err := metricsServices()
	if err != nil {
		return err
	}
	for _, svc := range services {
		obj := map[string]any{"apiVersion": "v1", "kind": "Service", "metadata": svc.ObjectMeta, "spec": svc.Spec} // no status
		if err := writeYAML(filepath.Join(manifests, svc.Name+"_v1_service.yaml"), "", obj); err != nil {
			return err
		}
	}
	rule, err := prometheusRule("")
	if err != nil {
		return err
	}
	if err := writeYAML(filepath.Join(manifests, ruleName+"_monitoring.coreos.com_v1_prometheusrule.yaml"), "", rule); err != nil {
		return err
	}
	// No trusted-keys Secret: OLM replaces a bundle Secret on every upgrade (its data with the
	// bundle's, none) and garbage-collects it with the CSV it was installed with, so the keys the
	// Manager wrote would be lost. The installer creates it (nexoctl install, or the command in
	// the CSV description), as the connect-token Secret (docs/upgrade.md, "OLM").
	annotations := bundleAnnotations()
	if err := writeYAML(filepath.Join(metadata, "annotations.yaml"), "", map[string]any{"annotations": annotations}); err != nil {
		return err
	}
	scorecardConfig, err := templateFiles.ReadFile("templates/scorecard-config.yaml")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(scorecard, "config.yaml"), scorecardConfig, 0o644); err != nil {
		return err
	}
	// Replace bundle/ only when everything was generated.
	if err := os.RemoveAll(bundleDir); err != nil {
		return err
	}
	if err := copyTree(tmp, bundleDir); err != nil {
		return err
	}
	var labels []map[string]string
	for _, k := range slices.Sorted(maps.Keys(annotations)) {
		labels = append(labels, map[string]string{"Key": k, "Value": annotations[k]})
	}
	if err := writeTemplate("bundle.Dockerfile", "bundle.Dockerfile", map[string]any{"Version": catalog.BuildVersion, "Labels": labels}); err != nil {
		return err
	}
	return olmCatalog()
}
