// Package packaging_test checks the generated packaging: the OLM bundle against the
// operator-framework validators, the Helm chart with the real Helm CLI and SDK, and the kustomize
// tree against a real API server.
package packaging_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
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
			// The deprecated-API check matches RBAC rules by group and resource only: a rule for
			// events.k8s.io "events" (the v1 Events API the operator posts to, controllers/eventpost)
			// reads to it as the events.k8s.io/v1beta1 removed in 1.25. Rules carry no version.
			if strings.Contains(w.Error(), "Migrate the API(s) for events:") && eventsRuleOnly(bundle.CSV) {
				t.Logf("known false positive (%s): %s", r.Name, w.Error())
				continue
			}
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
	// The proxy image the Manager reports is a plain env value config.env can replace. It is not
	// a related image: it is not built here, and a proxy runs the images its profile approves
	// (docs/release.md). The related images are exactly the two the bundle runs.
	if proxyImage != catalog.DefaultProxyImage || related[proxyImage] || len(related) != 2 {
		t.Errorf("the Manager's NEXO_PROXY_IMAGE is %q (want %s, not in relatedImages %v)", proxyImage, catalog.DefaultProxyImage, related)
	}
}

// TestBundleMeetsOperatorHubRequirements: what OperatorHub reads besides the validators.
func TestBundleMeetsOperatorHubRequirements(t *testing.T) {
	root := testcluster.RepoRoot()
	bundle := loadBundle(t, filepath.Join(root, "bundle"))
	csv := bundle.CSV
	for _, d := range csv.Spec.CustomResourceDefinitions.Owned {
		if len(d.SpecDescriptors) == 0 {
			t.Errorf("%s has no spec descriptors (the OperatorHub form would be empty)", d.Kind)
		}
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

// eventsRuleOnly: the only events rule the CSV grants is events.k8s.io create (the v1 API).
func eventsRuleOnly(csv *operatorsv1alpha1.ClusterServiceVersion) bool {
	for _, p := range csv.Spec.InstallStrategy.StrategySpec.ClusterPermissions {
		for _, r := range p.Rules {
			if slices.Contains(r.Resources, "events") && (!slices.Equal(r.APIGroups, []string{"events.k8s.io"}) || !slices.Equal(r.Verbs, []string{"create"})) {
				return false
			}
		}
	}
	return true
}
