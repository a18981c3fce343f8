package packaging_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/nexo-io/nexo-edge/catalog"
	"github.com/nexo-io/nexo-edge/contract/buildinfo"
	"github.com/nexo-io/nexo-edge/test/framework/testcluster"
)

// The release version is written once, as catalog.BuildVersion. Everything that names the
// version of this build, generated or written by hand, says the same; a version bump that
// misses one fails here (the generated ones also fail make verify-generated).
func TestEveryPlaceNamesTheOneVersion(t *testing.T) {
	v := catalog.BuildVersion
	if buildinfo.Version != v {
		t.Errorf("buildinfo.Version %q", buildinfo.Version)
	}
	root := testcluster.RepoRoot()
	read := func(rel string) string {
		b, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	var chart struct{ Version, AppVersion string }
	if err := yaml.Unmarshal([]byte(read("charts/nexo-edge/Chart.yaml")), &chart); err != nil {
		t.Fatal(err)
	}
	if chart.Version != v || chart.AppVersion != v {
		t.Errorf("Chart.yaml version %q appVersion %q", chart.Version, chart.AppVersion)
	}
	for rel, wants := range map[string][]string{
		"bundle/manifests/nexo-operator.clusterserviceversion.yaml": {"name: nexo-operator.v" + v, "version: " + v},
		"bundle/metadata/annotations.yaml":                          {"channel.default.v1: " + catalog.DefaultChannel(v), "channels.v1: " + strings.Join(catalog.Channels(v), ",")},
		"olm/subscribe.yaml":                                        {"channel: " + catalog.DefaultChannel(v)},
	} {
		body := read(rel)
		for _, w := range wants {
			if !strings.Contains(body, w) {
				t.Errorf("%s does not say %q", rel, w)
			}
		}
	}
	// Hand-written: every image of ours, and every version label, names this version.
	ours := regexp.MustCompile(`(ghcr\.io/nexo-io/nexo-[a-z-]+):([0-9][^"\s` + "`" + `]*)|app\.kubernetes\.io/version: (\S+)|tag: "([^"]*)"`)
	for _, rel := range []string{"charts/nexo-edge/values.yaml", "config/operator/operator.yaml", "config/manager/manager.yaml",
		"bundle/manifests/nexo-operator.clusterserviceversion.yaml", "charts/nexo-edge/README.md"} {
		found := 0
		for _, m := range ours.FindAllStringSubmatch(read(rel), -1) {
			got := m[2] + m[3] + m[4]
			if got != v && got != "v"+v {
				t.Errorf("%s: %q names version %q, not %s", rel, m[0], got, v)
			}
			found++
		}
		if found == 0 {
			t.Errorf("%s names no version: the check no longer reads it", rel)
		}
	}
}
