package packaging_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/blang/semver/v4"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	"sigs.k8s.io/yaml"

	"github.com/nexo-io/nexo-edge/catalog"
	"github.com/nexo-io/nexo-edge/test/framework/testcluster"
)

// entry is a channel entry of the file-based catalog.
type entry struct {
	Name      string `json:"name"`
	Replaces  string `json:"replaces"`
	SkipRange string `json:"skipRange"`
}

// fbc is the file-based catalog, read as OLM reads it.
type fbc struct {
	DefaultChannel string
	Channels       map[string][]entry
	Bundles        map[string]fbcBundle
}

type fbcBundle struct {
	Name          string `json:"name"`
	Image         string `json:"image"`
	RelatedImages []struct {
		Name  string `json:"name"`
		Image string `json:"image"`
	} `json:"relatedImages"`
	Properties []struct {
		Type  string         `json:"type"`
		Value map[string]any `json:"value"`
	} `json:"properties"`
}

func readCatalog(t *testing.T) fbc {
	raw, err := os.ReadFile(filepath.Join(testcluster.RepoRoot(), "olm/catalog/nexo-operator/catalog.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	c := fbc{Channels: map[string][]entry{}, Bundles: map[string]fbcBundle{}}
	packages := 0
	for _, doc := range strings.Split(string(raw), "\n---") {
		var obj struct {
			Schema         string  `json:"schema"`
			Name           string  `json:"name"`
			DefaultChannel string  `json:"defaultChannel"`
			Entries        []entry `json:"entries"`
		}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatal(err)
		}
		switch obj.Schema {
		case "olm.package":
			packages++
			c.DefaultChannel = obj.DefaultChannel
		case "olm.channel":
			c.Channels[obj.Name] = obj.Entries
		case "olm.bundle":
			var b fbcBundle
			if err := yaml.Unmarshal([]byte(doc), &b); err != nil {
				t.Fatal(err)
			}
			c.Bundles[b.Name] = b
		}
	}
	if packages != 1 {
		t.Fatalf("the catalog has %d olm.package", packages)
	}
	return c
}

// versionOf is the version in a CSV name (nexo-operator.v0.2.0).
func versionOf(csvName string) (semver.Version, error) {
	_, v, ok := strings.Cut(csvName, ".v")
	if !ok {
		return semver.Version{}, fmt.Errorf("%q is not <package>.v<version>", csvName)
	}
	return semver.Parse(v)
}

// checkChannel checks one channel's upgrade graph as OLM walks it: exactly one head (an entry
// nothing replaces or skips), every entry reachable from the head through replaces and
// skipRange edges, every edge pointing to an older version, and every replaces naming an entry
// of the channel. It returns the head.
func checkChannel(entries []entry) (string, error) {
	byName := map[string]entry{}
	for _, e := range entries {
		if _, dup := byName[e.Name]; dup {
			return "", fmt.Errorf("%s is listed twice", e.Name)
		}
		byName[e.Name] = e
	}
	// edges: entry -> the entries it replaces or skips.
	edges := map[string][]string{}
	for _, e := range entries {
		v, err := versionOf(e.Name)
		if err != nil {
			return "", err
		}
		if e.Replaces != "" {
			if _, ok := byName[e.Replaces]; !ok {
				return "", fmt.Errorf("%s replaces %s, which is not in the channel", e.Name, e.Replaces)
			}
			edges[e.Name] = append(edges[e.Name], e.Replaces)
		}
		var skip semver.Range
		if e.SkipRange != "" {
			if skip, err = semver.ParseRange(e.SkipRange); err != nil {
				return "", fmt.Errorf("%s: skipRange %q: %v", e.Name, e.SkipRange, err)
			}
		}
		for _, o := range entries {
			ov, _ := versionOf(o.Name)
			if skip != nil && skip(ov) && o.Name != e.Name {
				edges[e.Name] = append(edges[e.Name], o.Name)
			}
		}
		for _, to := range edges[e.Name] {
			if tv, _ := versionOf(to); !tv.LT(v) {
				return "", fmt.Errorf("%s has an edge to %s, which is not older", e.Name, to)
			}
		}
	}
	var heads []string
	for _, e := range entries {
		pointed := false
		for _, tos := range edges {
			pointed = pointed || slices.Contains(tos, e.Name)
		}
		if !pointed {
			heads = append(heads, e.Name)
		}
	}
	if len(heads) != 1 {
		return "", fmt.Errorf("%d heads %v, want one", len(heads), heads)
	}
	seen := map[string]bool{}
	var walk func(string)
	walk = func(n string) {
		if !seen[n] {
			seen[n] = true
			for _, to := range edges[n] {
				walk(to)
			}
		}
	}
	walk(heads[0])
	for _, e := range entries {
		if !seen[e.Name] {
			return "", fmt.Errorf("%s is not reachable from the head %s", e.Name, heads[0])
		}
	}
	return heads[0], nil
}

// The upgrade graph (docs/upgrade.md): the catalog holds the released versions, and this build's
// CSV joins each of its channels as the one head, reachable to every release in it; every
// released bundle and related image is pinned by digest; the default channel exists.
func TestUpgradeGraph(t *testing.T) {
	c := readCatalog(t)
	raw, err := os.ReadFile(filepath.Join(testcluster.RepoRoot(), "bundle/manifests/nexo-operator.clusterserviceversion.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	csv := &operatorsv1alpha1.ClusterServiceVersion{}
	if err := yaml.Unmarshal(raw, csv); err != nil {
		t.Fatal(err)
	}
	this := entry{Name: csv.Name, Replaces: csv.Spec.Replaces, SkipRange: csv.Annotations["olm.skipRange"]}
	_, released := c.Bundles[this.Name]
	if len(c.Bundles) > 0 && !released && this.Replaces == "" {
		t.Errorf("%s replaces nothing, but %d versions are released", this.Name, len(c.Bundles))
	}
	for _, ch := range catalog.Channels(catalog.BuildVersion) {
		entries := slices.Clone(c.Channels[ch])
		if !released {
			entries = append(entries, this)
		}
		head, err := checkChannel(entries)
		if err != nil {
			t.Errorf("channel %s: %v", ch, err)
		} else if head != this.Name {
			t.Errorf("channel %s: the head is %s, not this build's %s", ch, head, this.Name)
		}
	}
	if len(c.Bundles) > 0 {
		if _, ok := c.Channels[c.DefaultChannel]; !ok {
			t.Errorf("the default channel %q has no entries", c.DefaultChannel)
		}
	}
	for name, b := range c.Bundles {
		if !strings.Contains(b.Image, "@sha256:") {
			t.Errorf("bundle %s: image %s is not pinned by digest", name, b.Image)
		}
		if len(b.RelatedImages) == 0 {
			t.Errorf("bundle %s lists no related images", name)
		}
		for _, ri := range b.RelatedImages {
			if !strings.Contains(ri.Image, "@sha256:") {
				t.Errorf("bundle %s: related image %s is not pinned by digest", name, ri.Image)
			}
		}
		inChannel := false
		for _, entries := range c.Channels {
			inChannel = inChannel || slices.ContainsFunc(entries, func(e entry) bool { return e.Name == name })
		}
		if !inChannel {
			t.Errorf("bundle %s is in no channel", name)
		}
	}
}

// The graph check fails on the graphs OLM cannot walk.
func TestCheckChannelRefusesBrokenGraphs(t *testing.T) {
	for _, tc := range []struct {
		name    string
		entries []entry
		want    string
	}{
		{"two heads", []entry{{Name: "p.v0.2.0"}, {Name: "p.v0.3.0"}}, "2 heads"},
		{"dangling replaces", []entry{{Name: "p.v0.3.0", Replaces: "p.v0.2.0"}}, "not in the channel"},
		{"edge to a newer version", []entry{{Name: "p.v0.2.0", Replaces: "p.v0.3.0"}, {Name: "p.v0.3.0"}}, "not older"},
		{"unreachable", []entry{{Name: "p.v0.2.0"}, {Name: "p.v0.2.1"}, {Name: "p.v0.3.0", Replaces: "p.v0.2.1"}}, "2 heads"},
	} {
		if _, err := checkChannel(tc.entries); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	head, err := checkChannel([]entry{{Name: "p.v0.2.0"}, {Name: "p.v0.2.1", Replaces: "p.v0.2.0"}, {Name: "p.v0.3.0", Replaces: "p.v0.2.1", SkipRange: ">=0.2.0 <0.3.0"}})
	if err != nil || head != "p.v0.3.0" {
		t.Errorf("a good graph: head %q, %v", head, err)
	}
}
