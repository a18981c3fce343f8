package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/blang/semver/v4"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	"sigs.k8s.io/yaml"

	"github.com/nexo-io/nexo-edge/catalog"
	"github.com/nexo-io/nexo-edge/hack/releasebuild"
)

// releasesDir keeps every released version's artefacts (docs/release.md, "Released artefacts").
const releasesDir = "releases"

// released is one version under releases/: its CSV as released (images by digest) and the bundle
// image that carries it.
type released struct {
	Version     semver.Version
	CSV         *operatorsv1alpha1.ClusterServiceVersion
	BundleImage string // registry/nexo-operator-bundle@sha256:…
}

// releases reads releases/*, oldest first.
func releases() ([]released, error) {
	versions, err := releasebuild.Versions(".")
	if err != nil {
		return nil, err
	}
	var out []released
	for _, v := range versions {
		rec, err := releasebuild.Read(".", v.String())
		if err != nil {
			return nil, err
		}
		if rec.Bundle.Reference == "" {
			return nil, fmt.Errorf("releases/%s/release.json: no bundle image", v)
		}
		csvPath := filepath.Join(releasesDir, v.String(), "bundle", "manifests", packageName+".clusterserviceversion.yaml")
		raw, err := os.ReadFile(csvPath)
		if err != nil {
			return nil, err
		}
		csv := &operatorsv1alpha1.ClusterServiceVersion{}
		if err := yaml.UnmarshalStrict(raw, csv); err != nil {
			return nil, fmt.Errorf("%s: %w", csvPath, err)
		}
		out = append(out, released{Version: v, CSV: csv, BundleImage: rec.Bundle.Reference})
	}
	return out, nil
}

// publishedCatalog is the catalog image recorded with the newest release that has one
// (releases/<version>/catalog.json, written by hack/release), and the CSV that release added:
// what olm/subscribe.yaml names.
func publishedCatalog(rels []released) (image, csv string, err error) {
	for i := len(rels) - 1; i >= 0; i-- {
		raw, err := os.ReadFile(filepath.Join(releasesDir, rels[i].Version.String(), "catalog.json"))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return "", "", err
		}
		var rec struct {
			Reference string `json:"reference"`
		}
		if err := json.Unmarshal(raw, &rec); err != nil || !strings.Contains(rec.Reference, "@sha256:") {
			return "", "", fmt.Errorf("releases/%s/catalog.json names no image by digest (%v)", rels[i].Version, err)
		}
		return rec.Reference, rels[i].CSV.Name, nil
	}
	return "", "", fmt.Errorf("no release records a catalog image (releases/<version>/catalog.json): publish it with go run ./hack/release catalog -registry HOST/PATH")
}

// upgradeEdge is where this build's CSV comes from in the graph: it replaces the newest release
// older than it, and skips straight over catalog.UpgradesFrom (a bounded olm.skipRange), so a
// cluster on any version in that range upgrades in one step. The first release replaces nothing.
type upgradeEdge struct {
	Replaces  string
	SkipRange string
}

func edgeFor(version, upgradesFrom string, rels []released) (upgradeEdge, error) {
	v, err := semver.Parse(version)
	if err != nil {
		return upgradeEdge{}, err
	}
	var prev *released
	for i := range rels {
		if rels[i].Version.LT(v) {
			prev = &rels[i]
		}
	}
	switch {
	case prev == nil && upgradesFrom == "":
		return upgradeEdge{}, nil
	case prev == nil:
		return upgradeEdge{}, fmt.Errorf("catalog.UpgradesFrom is %q, but no release older than %s is under releases/", upgradesFrom, version)
	case upgradesFrom == "":
		return upgradeEdge{}, fmt.Errorf("catalog.UpgradesFrom is empty, but %s follows the release %s: set it (for example \">=%d.%d.0 <%s\")", version, prev.Version, prev.Version.Major, prev.Version.Minor, version)
	}
	in, err := semver.ParseRange(upgradesFrom)
	if err != nil {
		return upgradeEdge{}, fmt.Errorf("catalog.UpgradesFrom %q: %w", upgradesFrom, err)
	}
	if !in(prev.Version) || in(v) {
		return upgradeEdge{}, fmt.Errorf("catalog.UpgradesFrom %q must hold the previous release %s and not %s itself", upgradesFrom, prev.Version, v)
	}
	return upgradeEdge{Replaces: packageName + ".v" + prev.Version.String(), SkipRange: upgradesFrom}, nil
}

// buildEdge is this build's upgrade edge.
func buildEdge() (upgradeEdge, error) {
	rels, err := releases()
	if err != nil {
		return upgradeEdge{}, err
	}
	return edgeFor(catalog.BuildVersion, catalog.UpgradesFrom, rels)
}
