// Package packaging_test checks the generated packaging: the OLM bundle against the
// operator-framework validators, the Helm chart with the real Helm CLI and SDK, and the kustomize
// tree against a real API server.
package packaging_test

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/blang/semver/v4"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/operator-framework/api/pkg/manifests"
	"github.com/operator-framework/api/pkg/validation"

	"github.com/nexo-io/nexo-edge/catalog"
	"github.com/nexo-io/nexo-edge/test/framework/testcluster"
)

// TestBundleValidates runs the suites `operator-sdk bundle validate` runs by default and with
// --select-optional suite=operatorframework (OperatorHub, capabilities, categories) plus the
// good-practices suite: no errors and no warnings allowed.
func TestBundleValidates(t *testing.T) {
	bundle := loadBundle(t, filepath.Join(testcluster.RepoRoot(), "bundle"))
	if bundle.CSV == nil || len(bundle.V1CRDs) != len(catalog.Kinds) {
		t.Fatalf("bundle has CSV=%v and %d CRDs, want 24", bundle.CSV != nil, len(bundle.V1CRDs))
	}
	validators := validation.DefaultBundleValidators.WithValidators(
		validation.OperatorHubV2Validator,
		validation.StandardCapabilitiesValidator,
		validation.StandardCategoriesValidator,
		validation.GoodPracticesValidator,
		validation.ObjectValidator,
	)
	objs := []any{bundle, bundle.CSV}
	for _, crd := range bundle.V1CRDs {
		objs = append(objs, crd)
	}
	results := validators.Validate(objs...)
	var nErr, nWarn int
	for _, r := range results {
		for _, e := range r.Errors {
			nErr++
			t.Errorf("error (%s): %s", r.Name, e.Error())
		}
		for _, w := range r.Warnings {
			nWarn++
			t.Errorf("warning (%s): %s", r.Name, w.Error())
		}
	}
	t.Logf("bundle validation: %d results, %d errors, %d warnings", len(results), nErr, nWarn)

	owned := bundle.CSV.Spec.CustomResourceDefinitions.Owned
	if len(owned) != len(catalog.Kinds) {
		t.Fatalf("CSV owns %d CRDs, want %d", len(owned), len(catalog.Kinds))
	}
	for i, k := range catalog.Kinds {
		if owned[i].Kind != k.Kind || owned[i].Name != k.CRDName() || owned[i].DisplayName == "" || owned[i].Description == "" {
			t.Errorf("owned[%d] = %+v, want %s with display name and description", i, owned[i], k.Kind)
		}
	}
	if bundle.CSV.Spec.Version.String() != catalog.BuildVersion {
		t.Errorf("CSV version %s, want %s", bundle.CSV.Spec.Version, catalog.BuildVersion)
	}
}

// loadBundle reads a bundle directory into the object GetBundleFromDir builds. (The library's
// loader decodes every file twice with one decoder after seeking back, which apimachinery
// v0.37's YAML decoder does not support: the second decode sees EOF.)
func loadBundle(t *testing.T, dir string) *manifests.Bundle {
	t.Helper()
	b := &manifests.Bundle{}
	files, err := filepath.Glob(filepath.Join(dir, "manifests", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var size int64
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		size += int64(len(raw))
		_, _ = zw.Write(raw)
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(raw, &u.Object); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		b.Objects = append(b.Objects, u)
		switch u.GetKind() {
		case "ClusterServiceVersion":
			b.CSV = &operatorsv1alpha1.ClusterServiceVersion{}
			if err := yaml.UnmarshalStrict(raw, b.CSV); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			b.Name = b.CSV.Name
		case "CustomResourceDefinition":
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := yaml.UnmarshalStrict(raw, crd); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			b.V1CRDs = append(b.V1CRDs, crd)
		case "ClusterRole":
			// Shipped unbound (a kind OLM bundles may carry): nexo-operator-secret-copies holds
			// only the Secret writes that the CSV leaves out; nexo-operator-metrics-reader only
			// GET /metrics, for whoever scrapes the operator.
			switch u.GetName() {
			case "nexo-operator-secret-copies":
			case "nexo-operator-metrics-reader":
				if rules, _, _ := unstructured.NestedSlice(u.Object, "rules"); len(rules) != 1 || fmt.Sprint(rules) != "[map[nonResourceURLs:[/metrics] verbs:[get]]]" {
					t.Errorf("metrics-reader rules %v", rules)
				}
			default:
				t.Errorf("unexpected ClusterRole %s in bundle manifests", u.GetName())
			}
		case "Service", "PrometheusRule":
			// The metrics Services and the alerts (docs/monitoring.md; TestMonitoringShipsOnEveryPath).
			if !slices.Contains([]string{"nexo-operator-metrics", "nexo-manager-metrics", "nexo-edge"}, u.GetName()) {
				t.Errorf("unexpected %s %s in bundle manifests", u.GetKind(), u.GetName())
			}
		default:
			// No Secret either: OLM would replace a bundle Secret's data on every upgrade and
			// delete it with the CSV that installed it, taking the Manager's keys with it.
			t.Errorf("unexpected %s in bundle manifests", u.GetKind())
		}
	}
	_ = zw.Close()
	b.Size, b.CompressedSize = size, int64(gz.Len())
	var ann manifests.AnnotationsFile
	raw, err := os.ReadFile(filepath.Join(dir, "metadata", "annotations.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, &ann); err != nil {
		t.Fatal(err)
	}
	b.Package = ann.Annotations.PackageName
	b.Channels = strings.Split(ann.Annotations.Channels, ",")
	b.DefaultChannel = ann.Annotations.DefaultChannelName
	if b.Package != "nexo-operator" || b.DefaultChannel == "" {
		t.Errorf("annotations: package %q default channel %q", b.Package, b.DefaultChannel)
	}
	return b
}

// TestCSVTakesItsConfigurationFromTheSubscription: OLM users configure through the
// Subscription's config.env, which OLM adds to every container of the CSV's Deployments. So
// neither container may pin the Control Plane URL or the environment in its args (an arg wins
// over the environment variable the flag defaults to), and the CSV names no historical host.
func TestCSVTakesItsConfigurationFromTheSubscription(t *testing.T) {
	bundle := loadBundle(t, filepath.Join(testcluster.RepoRoot(), "bundle"))
	raw, _ := yaml.Marshal(bundle.CSV)
	if strings.Contains(string(raw), "cp.nexo.io") {
		t.Error("the CSV names cp.nexo.io, a historical host and no contract")
	}
	related := map[string]bool{}
	for _, r := range bundle.CSV.Spec.RelatedImages {
		related[r.Image] = true
	}
	proxyImage := ""
	for _, d := range bundle.CSV.Spec.InstallStrategy.StrategySpec.DeploymentSpecs {
		for _, c := range d.Spec.Template.Spec.Containers {
			if !related[c.Image] {
				t.Errorf("%s/%s runs %s, which relatedImages does not list", d.Name, c.Name, c.Image)
			}
			for _, e := range c.Env {
				if e.Name == "NEXO_PROXY_IMAGE" {
					proxyImage = e.Value
				}
			}
			for _, a := range c.Args {
				if strings.HasPrefix(a, "--control-plane-url") || strings.HasPrefix(a, "--environment-id") {
					t.Errorf("%s/%s pins %s; the Subscription's config.env could not override it", d.Name, c.Name, a)
				}
			}
		}
	}
	// The proxy image the Manager reports is a plain env value config.env can replace, and a
	// related image, so a mirror copies it (make release pins it by digest, docs/release.md). The
	// related images are the two the bundle runs and it.
	if proxyImage != catalog.DefaultProxyImage || !related[proxyImage] || len(related) != 3 {
		t.Errorf("the Manager's NEXO_PROXY_IMAGE is %q (want %s, in relatedImages %v)", proxyImage, catalog.DefaultProxyImage, related)
	}
}

// TestBundleMeetsOperatorHubRequirements: what OperatorHub reads besides the validators.
func TestBundleMeetsOperatorHubRequirements(t *testing.T) {
	root := testcluster.RepoRoot()
	bundle := loadBundle(t, filepath.Join(root, "bundle"))
	csv := bundle.CSV
	support := map[string]catalog.Support{}
	for _, k := range catalog.Kinds {
		support[k.Kind] = k.Support
	}
	for _, d := range csv.Spec.CustomResourceDefinitions.Owned {
		if len(d.SpecDescriptors) == 0 {
			t.Errorf("%s has no spec descriptors (the OperatorHub form would be empty)", d.Kind)
		}
		// scorecard's olm-crds-have-resources, and the console's Resources tab.
		if len(d.Resources) == 0 {
			t.Errorf("%s lists no resources", d.Kind)
		}
		for _, r := range d.Resources {
			if r.Name == "" || r.Kind == "" || r.Version == "" {
				t.Errorf("%s: resource %+v lacks its name, kind or version", d.Kind, r)
			}
		}
		// Every reconciled kind shows its conditions in the console.
		conditions := slices.ContainsFunc(d.StatusDescriptors, func(s operatorsv1alpha1.StatusDescriptor) bool {
			return s.Path == "conditions" && slices.Contains(s.XDescriptors, "urn:alm:descriptor:io.kubernetes.conditions")
		})
		if conditions != (support[d.Kind] == catalog.Reconciled) {
			t.Errorf("%s (%s): a conditions status descriptor: %v", d.Kind, support[d.Kind], conditions)
		}
	}
	// A real icon: an SVG logo of its own, not a placeholder.
	if len(csv.Spec.Icon) != 1 || csv.Spec.Icon[0].MediaType != "image/svg+xml" {
		t.Fatalf("CSV icon %d entries", len(csv.Spec.Icon))
	}
	svg, err := base64.StdEncoding.DecodeString(csv.Spec.Icon[0].Data)
	if err != nil || !strings.HasPrefix(string(svg), "<svg") || len(svg) < 1024 || xml.Unmarshal(svg, new(struct{})) != nil {
		t.Errorf("CSV icon: %d bytes of SVG (%v), want a well-formed logo", len(svg), err)
	}
	// OpenShift 4.N runs Kubernetes 1.(N+13): the oldest OpenShift named must meet minKubeVersion.
	raw, err := os.ReadFile(filepath.Join(root, "bundle", "metadata", "annotations.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	min, err := semver.ParseTolerant(csv.Spec.MinKubeVersion)
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("com.redhat.openshift.versions: v4.%d", min.Minor-13); !strings.Contains(string(raw), want) {
		t.Errorf("annotations.yaml does not say %q for minKubeVersion %s:\n%s", want, csv.Spec.MinKubeVersion, raw)
	}
	// The Manager needs its Control Plane over the network: never "disconnected" (docs/release.md).
	if got := csv.Annotations["features.operators.openshift.io/disconnected"]; got != "false" {
		t.Errorf("disconnected %q: the Manager needs its Control Plane, so the claim must be false", got)
	}
	if csv.Annotations["features.operators.openshift.io/proxy-aware"] != "true" {
		t.Error("the Manager honours HTTPS_PROXY: proxy-aware must be true")
	}
	// The console: a schema-only kind offers no "Create" (listed as internal; its example stays,
	// which the bundle validator asks of every owned API); the platforms make images builds are
	// labelled.
	var examples []map[string]any
	if err := json.Unmarshal([]byte(csv.Annotations["alm-examples"]), &examples); err != nil {
		t.Fatal(err)
	}
	exampleKinds := map[string]bool{}
	for _, e := range examples {
		exampleKinds[fmt.Sprint(e["kind"])] = true
	}
	var internal []string
	if err := json.Unmarshal([]byte(csv.Annotations["operators.operatorframework.io/internal-objects"]), &internal); err != nil {
		t.Fatalf("internal-objects: %v", err)
	}
	for _, k := range catalog.Kinds {
		schemaOnly := k.Support == catalog.SchemaOnly
		if !exampleKinds[k.Kind] {
			t.Errorf("%s has no alm-example", k.Kind)
		}
		if slices.Contains(internal, k.CRDName()) != schemaOnly {
			t.Errorf("%s (%s): internal-objects lists it %v", k.Kind, k.Support, !schemaOnly)
		}
	}
	for _, l := range []string{"operatorframework.io/arch.amd64", "operatorframework.io/arch.arm64", "operatorframework.io/os.linux"} {
		if csv.Labels[l] != "supported" {
			t.Errorf("CSV label %s is %q, want supported", l, csv.Labels[l])
		}
	}
	// A console install has no config.env: the description names the steps that replace it.
	for _, step := range []string{"nexo-manager-config", "controlPlaneURL", "environmentID", "nexo-connect-token", "NEXO_DEPLOY_NAMESPACES", "not configured", "--control-plane-url"} {
		if !strings.Contains(csv.Spec.Description, step) {
			t.Errorf("the CSV description does not name %q", step)
		}
	}
	// Each file-based catalog bundle entry carries the metadata a renderer would write from the
	// CSV released with it (releases/<version>/bundle).
	fbc, err := os.ReadFile(filepath.Join(root, "olm", "catalog", "nexo-operator", "catalog.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	entries := 0
	for _, doc := range strings.Split(string(fbc), "\n---\n") {
		var entry struct {
			Schema     string `json:"schema"`
			Name       string `json:"name"`
			Properties []struct {
				Type  string         `json:"type"`
				Value map[string]any `json:"value"`
			} `json:"properties"`
		}
		if yaml.Unmarshal([]byte(doc), &entry) != nil || entry.Schema != "olm.bundle" {
			continue
		}
		entries++
		released := &operatorsv1alpha1.ClusterServiceVersion{}
		raw, err := os.ReadFile(filepath.Join(root, "releases", strings.TrimPrefix(entry.Name, "nexo-operator.v"), "bundle", "manifests", "nexo-operator.clusterserviceversion.yaml"))
		if err != nil || yaml.Unmarshal(raw, released) != nil {
			t.Fatalf("the catalog lists %s, which is not under releases/: %v", entry.Name, err)
		}
		found := false
		for _, p := range entry.Properties {
			if p.Type == "olm.csv.metadata" {
				found = p.Value["displayName"] == released.Spec.DisplayName && p.Value["description"] == released.Spec.Description && p.Value["crdDescriptions"] != nil
			}
		}
		if !found {
			t.Errorf("the olm.bundle entry %s has no olm.csv.metadata matching its released CSV (displayName, description, crdDescriptions)", entry.Name)
		}
	}
	releases, _ := filepath.Glob(filepath.Join(root, "releases", "*", "release.json"))
	if entries != len(releases) {
		t.Errorf("the catalog has %d bundles, releases/ %d", entries, len(releases))
	}
}
