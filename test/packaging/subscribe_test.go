package packaging_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	operatorsv1 "github.com/operator-framework/api/pkg/operators/v1"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	"k8s.io/apimachinery/pkg/util/yaml"

	"github.com/nexo-io/nexo-edge/hack/releasebuild"
	"github.com/nexo-io/nexo-edge/test/framework/testcluster"
)

// olm/subscribe.yaml is what an OLM user applies: its CatalogSource names the catalog image
// published with the newest release that has one (releases/<version>/catalog.json) by digest,
// served through extractContent (the image holds /configs only), and its Subscription starts at a
// CSV that catalog holds, in the channel it subscribes to. Nothing in it is a moving tag.
func TestSubscribeNamesAReleasedCatalog(t *testing.T) {
	root := testcluster.RepoRoot()
	raw, err := os.ReadFile(filepath.Join(root, "olm", "subscribe.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), ":latest") {
		t.Error("olm/subscribe.yaml names a :latest tag")
	}
	var src operatorsv1alpha1.CatalogSource
	var sub operatorsv1alpha1.Subscription
	var groups int
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for {
		var doc json.RawMessage
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		var meta struct{ Kind string }
		if err := json.Unmarshal(doc, &meta); err != nil {
			t.Fatal(err)
		}
		switch meta.Kind {
		case "CatalogSource":
			err = json.Unmarshal(doc, &src)
		case "Subscription":
			err = json.Unmarshal(doc, &sub)
		case "OperatorGroup":
			groups++
			err = json.Unmarshal(doc, &operatorsv1.OperatorGroup{})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if groups != 1 || sub.Spec == nil {
		t.Fatalf("subscribe.yaml: %d OperatorGroups, Subscription %+v", groups, sub.Spec)
	}

	// The newest release with a catalog record.
	versions, err := releasebuild.Versions(root)
	if err != nil {
		t.Fatal(err)
	}
	var recorded, releasedCSV string
	for i := len(versions) - 1; i >= 0 && recorded == ""; i-- {
		b, err := os.ReadFile(filepath.Join(root, "releases", versions[i].String(), "catalog.json"))
		if os.IsNotExist(err) {
			continue
		} else if err != nil {
			t.Fatal(err)
		}
		var rec struct{ Reference string }
		if err := json.Unmarshal(b, &rec); err != nil {
			t.Fatal(err)
		}
		recorded, releasedCSV = rec.Reference, "nexo-operator.v"+versions[i].String()
	}
	if recorded == "" || !strings.Contains(recorded, "@sha256:") {
		t.Fatalf("no release records its catalog image by digest (%q)", recorded)
	}
	if src.Spec.Image != recorded {
		t.Errorf("the CatalogSource runs %q, want the published catalog %q", src.Spec.Image, recorded)
	}
	if src.Spec.GrpcPodConfig == nil || src.Spec.GrpcPodConfig.ExtractContent == nil || src.Spec.GrpcPodConfig.ExtractContent.CatalogDir != "/configs" {
		t.Errorf("the CatalogSource must extract /configs (the image has no opm): %+v", src.Spec.GrpcPodConfig)
	}
	if sub.Spec.StartingCSV != releasedCSV || sub.Spec.CatalogSource != src.Name {
		t.Errorf("the Subscription starts at %q from %q, want %q from %q", sub.Spec.StartingCSV, sub.Spec.CatalogSource, releasedCSV, src.Name)
	}
	cat := readCatalog(t)
	if _, ok := cat.Bundles[sub.Spec.StartingCSV]; !ok {
		t.Errorf("the catalog holds no bundle %s", sub.Spec.StartingCSV)
	}
	if !slices.ContainsFunc(cat.Channels[sub.Spec.Channel], func(e entry) bool { return e.Name == sub.Spec.StartingCSV }) {
		t.Errorf("channel %q does not hold %s", sub.Spec.Channel, sub.Spec.StartingCSV)
	}
}
