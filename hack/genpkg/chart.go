package main

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	helmchart "helm.sh/helm/v3/pkg/chart"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/yaml"

	"github.com/nexo-io/nexo-edge/catalog"
	"github.com/nexo-io/nexo-edge/config/admission"
)

// chartLabels is the chart's label block (templates/_helpers.tpl), under a metadata.labels: line.
const chartLabels = "    {{- include \"nexo.labels\" . | nindent 4 }}\n"

// chart writes the chart's generated templates (CRDs, operator RBAC, aggregated roles, admission
// policies), its monitoring files and Chart.yaml, and the kustomize files derived from the same
// sources.
func chart() error {
	if err := chartCRDs(); err != nil {
		return err
	}
	rules, err := rbacRules()
	if err != nil {
		return err
	}
	if err := writeKustomizeRBAC(rules); err != nil {
		return err
	}
	templatesDir := filepath.Join(chartDir, "templates")
	if err := writeTemplate(filepath.Join(templatesDir, "operator-clusterrole.yaml"), "chart-operator-clusterrole.yaml",
		map[string]any{"Header": generatedHeader, "Rules": map[string]any{
			"Workload": rules.workload, "SecretCopies": rules.secretCopies, "OperatorNamespace": rules.operatorNamespace}}); err != nil {
		return err
	}
	if err := writeTemplate(filepath.Join(templatesDir, "aggregate-clusterroles.yaml"), "chart-aggregate-clusterroles.yaml",
		map[string]any{"Header": generatedHeader, "Roles": aggregatedRoleList()}); err != nil {
		return err
	}
	if err := chartAdmissionPolicies(); err != nil {
		return err
	}
	if err := kustomizeAdmissionInstallation(); err != nil {
		return err
	}
	if err := monitoring(); err != nil {
		return err
	}
	if err := chartREADME(); err != nil {
		return err
	}
	return chartYAML()
}

// chartYAML writes Chart.yaml from the catalog: the version, the kinds, the minimum Kubernetes.
func chartYAML() error {
	meta := &helmchart.Metadata{
		APIVersion:  helmchart.APIVersionV2,
		Name:        "nexo-edge",
		Description: "Nexo Edge — the nexo-operator, the Nexo Manager and the " + strconv.Itoa(len(catalog.Kinds)) + " " + catalog.Group + " CRDs.",
		Type:        "application",
		Version:     catalog.BuildVersion,
		AppVersion:  catalog.BuildVersion,
		KubeVersion: ">=" + catalog.MinKubernetesVersion + "-0",
		Home:        "https://github.com/nexo-io/nexo-edge",
		Icon:        "https://nexo.io/images/nexo-edge.svg",
		Keywords:    []string{"mongodb", "proxy", "operator"},
		Maintainers: []*helmchart.Maintainer{{Name: "Nexo Edge", Email: "edge@nexo.io"}},
	}
	return writeYAML(filepath.Join(chartDir, "Chart.yaml"), generatedHeader, meta)
}

// chartCRDs copies each CRD of config/crd/bases into the chart, behind crds.install and with the
// chart's labels.
func chartCRDs() error {
	files, err := crdFiles()
	if err != nil {
		return err
	}
	crdOut := filepath.Join(chartDir, "templates", "crds")
	if err := os.RemoveAll(crdOut); err != nil {
		return err
	}
	if err := os.MkdirAll(crdOut, 0o755); err != nil {
		return err
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		if bytes.Contains(raw, []byte("{{")) {
			return fmt.Errorf("%s contains '{{', which Helm would read as a template", f)
		}
		crd := strings.TrimPrefix(string(raw), "---\n")
		if !strings.Contains(crd, "\n  labels:\n") {
			return fmt.Errorf("%s has no metadata.labels (hack/crdmeta stamps them)", f)
		}
		crd = strings.Replace(crd, "\n  labels:\n", "\n  labels:\n"+chartLabels, 1)
		if err := writeTemplate(filepath.Join(crdOut, filepath.Base(f)), "chart-crd.yaml", map[string]any{"Header": generatedHeader, "CRD": crd}); err != nil {
			return err
		}
	}
	return nil
}

// aggregatedRoleList is aggregatedRules in the order the roles are written.
func aggregatedRoleList() []map[string]any {
	rules := aggregatedRules()
	var out []map[string]any
	for _, name := range []string{"view", "edit", "admin"} {
		out = append(out, map[string]any{"Name": name, "Rules": rules[name]})
	}
	return out
}

// sharedPolicy is one object of config/admission as the chart renders it: only when no other
// release owns it (one cluster, several installations), kept on uninstall (the others use it).
type sharedPolicy struct{ Kind, Name, Body string }

// chartAdmissionPolicies writes templates/admission-policy.yaml: the shared policies of
// config/admission, then this release's binding and parameters, built by
// admission.Installation.
func chartAdmissionPolicies() error {
	// The chart's own labels replace the kustomize source's part-of label (they include it).
	const partOf = "\n  labels:\n    app.kubernetes.io/part-of: nexo-edge\n"
	var shared []sharedPolicy
	for _, name := range slices.Sorted(maps.Keys(admission.Files)) {
		src := admission.Files[name]
		if strings.Contains(src, "{{") {
			return fmt.Errorf("config/admission/%s must contain no '{{'", name)
		}
		for _, doc := range strings.Split(src, "\n---\n") {
			var meta struct {
				Kind     string `json:"kind"`
				Metadata struct {
					Name string `json:"name"`
				} `json:"metadata"`
			}
			if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
				return err
			}
			if strings.Count(doc, partOf) != 1 {
				return fmt.Errorf("config/admission/%s: want %s labelled exactly app.kubernetes.io/part-of: nexo-edge", name, meta.Metadata.Name)
			}
			body := strings.Replace(doc, partOf, "\n  labels:\n"+chartLabels+"  annotations:\n    helm.sh/resource-policy: keep\n", 1)
			shared = append(shared, sharedPolicy{meta.Kind, meta.Metadata.Name, strings.TrimSpace(body)})
		}
	}
	// The installation's two bindings, built with stand-ins the template's Helm expressions
	// replace: the namespaces it serves, and its Manager's limits (the values the Manager reads).
	const nsToken, scopeToken, deployToken, imagesToken = "RELEASE-NAMESPACE", "WATCHED-NAMESPACES", "DEPLOY-NAMESPACES", "IMAGE-REPOSITORIES"
	binding, err := chartBinding(admission.Installation(nsToken, []string{scopeToken}), map[string]string{
		nsToken: "{{ .Release.Namespace }}",
		admission.NamespacesAnnotation + ": " + scopeToken: admission.NamespacesAnnotation + ": {{ include \"nexo.admissionScope\" . | quote }}",
	})
	if err != nil {
		return err
	}
	limit, err := chartBinding(admission.DeployLimit(nsToken, []string{deployToken}, []string{imagesToken}), map[string]string{
		nsToken: "{{ .Release.Namespace }}",
		admission.DeployNamespacesAnnotation + ": " + deployToken:  admission.DeployNamespacesAnnotation + ": {{ join \",\" .Values.manager.deployNamespaces | quote }}",
		admission.ImageRepositoriesAnnotation + ": " + imagesToken: admission.ImageRepositoriesAnnotation + ": {{ join \",\" .Values.manager.allowedImageRepositories | quote }}",
	})
	if err != nil {
		return err
	}
	return writeTemplate(filepath.Join(chartDir, "templates", "admission-policy.yaml"), "chart-admission-policy.yaml",
		map[string]any{"Header": generatedHeader, "Shared": shared, "Binding": binding, "DeployLimit": limit})
}

// chartBinding renders an installation's binding as a chart template: the chart's labels, and
// each stand-in replaced by its Helm expression. A stand-in left over is an error.
func chartBinding(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding, helm map[string]string) (string, error) {
	const partOf = "  labels:\n    app.kubernetes.io/part-of: nexo-edge\n"
	out, err := bindingYAML(b)
	if err != nil {
		return "", err
	}
	out = strings.Replace(out, partOf, "  labels:\n"+chartLabels, 1)
	for _, standIn := range slices.Sorted(maps.Keys(helm)) {
		if !strings.Contains(out, standIn) {
			return "", fmt.Errorf("binding %s: the chart template did not take %q:\n%s", b.Name, standIn, out)
		}
		out = strings.ReplaceAll(out, standIn, helm[standIn])
	}
	return out, nil
}
