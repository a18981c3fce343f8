package packaging_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

// render runs helm template with values (YAML) and returns the documents, each parsed strictly:
// a duplicate key (two annotations of one name, say) fails the render.
func render(t *testing.T, values string) (map[string][]byte, error) {
	t.Helper()
	// The test's defaults first, then values: a later -f wins, merged key by key.
	defaults, f := filepath.Join(t.TempDir(), "defaults.yaml"), filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(defaults, []byte("crds: {install: false}\nmanager: {controlPlaneURL: https://cp.example.invalid}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f, []byte(values), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := helmCLI(t, "template", "nexo-edge", chartDir, "-n", "nexo-system", "--kube-version", "1.37.0", "-f", defaults, "-f", f)
	if err != nil {
		return nil, &renderError{out}
	}
	docs := map[string][]byte{}
	for _, d := range strings.Split(out, "\n---\n") {
		var meta struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(d), &meta); err != nil || meta.Kind == "" {
			continue
		}
		var anyObj map[string]any
		if err := yaml.UnmarshalStrict([]byte(d), &anyObj); err != nil {
			t.Errorf("%s %s does not parse strictly: %v", meta.Kind, meta.Metadata.Name, err)
		}
		key := meta.Kind + "/" + meta.Metadata.Name
		if _, dup := docs[key]; dup {
			key += "/" + strings.Fields(strings.SplitAfter(d, "namespace: ")[1])[0] // RoleBindings of one name in several namespaces
		}
		docs[key] = []byte(d)
	}
	return docs, nil
}

type renderError struct{ out string }

func (e *renderError) Error() string { return e.out }

func object[T any](t *testing.T, docs map[string][]byte, key string) *T {
	t.Helper()
	raw, ok := docs[key]
	if !ok {
		t.Fatalf("the chart renders no %s", key)
	}
	o := new(T)
	if err := yaml.Unmarshal(raw, o); err != nil {
		t.Fatal(err)
	}
	return o
}

// TestChartValuesDoWhatTheySay: values that once did nothing or broke the install.
func TestChartValuesDoWhatTheySay(t *testing.T) {
	t.Run("operator.trustedKeysSecret", func(t *testing.T) {
		docs, err := render(t, "operator: {trustedKeysSecret: cp-keys}\n")
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := docs["Secret/cp-keys"]; !ok {
			t.Error("the Secret named by operator.trustedKeysSecret is not created")
		}
		if _, ok := docs["Secret/nexo-trusted-keys"]; ok {
			t.Error("the default trusted-keys Secret is still created")
		}
		mgr := object[appsv1.Deployment](t, docs, "Deployment/nexo-manager")
		op := object[appsv1.Deployment](t, docs, "Deployment/nexo-operator")
		if !slices.Contains(mgr.Spec.Template.Spec.Containers[0].Args, "--trusted-keys-secret=cp-keys") {
			t.Errorf("the Manager writes another Secret than it mounts: %v", mgr.Spec.Template.Spec.Containers[0].Args)
		}
		if !slices.Contains(op.Spec.Template.Spec.Containers[0].Args, "--trusted-keys-secret=cp-keys") {
			t.Errorf("the operator reads another Secret: %v", op.Spec.Template.Spec.Containers[0].Args)
		}
		for _, v := range mgr.Spec.Template.Spec.Volumes {
			if v.Name == "trusted-keys" && v.Secret.SecretName != "cp-keys" {
				t.Errorf("the Manager mounts %s", v.Secret.SecretName)
			}
		}
		role := object[rbacv1.Role](t, docs, "Role/nexo-manager")
		for _, r := range role.Rules {
			if slices.Contains(r.Resources, "secrets") && !slices.Equal(r.ResourceNames, []string{"cp-keys"}) {
				t.Errorf("the Manager's Role grants Secrets %v, want only cp-keys", r.ResourceNames)
			}
		}
	})
	t.Run("global.imagePullSecrets", func(t *testing.T) {
		docs, err := render(t, "imagePullSecrets: [mine, {name: shared}]\nglobal: {imagePullSecrets: [{name: shared}, corp]}\n")
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range []string{"Deployment/nexo-operator", "Deployment/nexo-manager"} {
			var got []string
			for _, r := range object[appsv1.Deployment](t, docs, d).Spec.Template.Spec.ImagePullSecrets {
				got = append(got, r.Name)
			}
			if !slices.Equal(got, []string{"mine", "shared", "corp"}) {
				t.Errorf("%s pulls with %v, want mine, shared, corp (each once)", d, got)
			}
		}
	})
	t.Run("operator.podAnnotations and podLabels", func(t *testing.T) {
		docs, err := render(t, "operator: {podAnnotations: {team: edge}, podLabels: {team: edge}}\n")
		if err != nil {
			t.Fatal(err)
		}
		tpl := object[appsv1.Deployment](t, docs, "Deployment/nexo-operator").Spec.Template
		if tpl.Annotations["team"] != "edge" || tpl.Labels["team"] != "edge" || tpl.Annotations["checksum/config"] == "" {
			t.Errorf("pod template annotations %v labels %v", tpl.Annotations, tpl.Labels)
		}
	})
	for name, c := range map[string]struct{ values, want string }{
		"duplicate watched namespaces": {"operator: {watchNamespaces: [shop, shop]}\n", "/operator/watchNamespaces"},
		"duplicate copy namespaces":    {"operator: {secretCopyNamespaces: [shop, shop]}\n", "/operator/secretCopyNamespaces"},
		"the chart's own annotation":   {"operator: {podAnnotations: {checksum/config: x}}\n", "invalid propertyName 'checksum/config'"},
		"the Manager's selector label": {"manager: {podLabels: {app.kubernetes.io/name: x}}\n", "invalid propertyName 'app.kubernetes.io/name'"},
		"an unknown global":            {"global: {imagePullSecrets: [\"Bad Name\"]}\n", "/global/imagePullSecrets"},
	} {
		t.Run("refused: "+name, func(t *testing.T) {
			_, err := render(t, c.values)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("want a schema error naming %s, got %v", c.want, err)
			}
		})
	}
}

// TestServiceMonitorNeedsATokenWithSecureMetrics: a ServiceMonitor for authenticated metrics
// without a token to send is refused with what to set, not rendered to fail at scrape time.
func TestServiceMonitorNeedsATokenWithSecureMetrics(t *testing.T) {
	_, err := render(t, "metrics: {serviceMonitor: {enabled: true}}\n")
	if err == nil || !strings.Contains(err.Error(), "metrics.serviceMonitor.tokenSecret.name is required with metrics.secure") {
		t.Errorf("want the chart to ask for metrics.serviceMonitor.tokenSecret.name, got %v", err)
	}
	docs, err := render(t, "metrics: {secure: false, serviceMonitor: {enabled: true}}\n")
	if err != nil {
		t.Fatal(err)
	}
	if sm := string(docs["ServiceMonitor/nexo-operator"]); strings.Contains(sm, "authorization") || strings.Contains(sm, "https") || strings.Contains(sm, "bearerTokenFile") {
		t.Errorf("plain-HTTP metrics scraped with credentials or TLS:\n%s", sm)
	}
}
