package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/nexo-io/nexo-edge/hack/releasebuild"
)

// The catalog image (docs/release.md, "The catalog image"): the file-based catalog olm/catalog
// at /configs and nothing else. A CatalogSource runs it with grpcPodConfig.extractContent
// (catalogDir /configs): OLM copies the content out and serves it with its own opm, so the image
// needs no opm base, which this machine could not pull, and one catalog gives one digest.
const (
	catalogImageName = "nexo-operator-catalog"
	catalogDir       = "/configs"
	// catalogRecord, in the newest release's folder, names the catalog image published with it
	// (it holds every release up to that one); olm/subscribe.yaml names it by digest.
	catalogRecord = "catalog.json"
)

// releaseRecord is what a release's release.json says of itself (the fields the catalog needs).
type releaseRecord struct {
	Version  string `json:"version"`
	Commit   string `json:"commit"`
	Created  string `json:"created"`
	Registry string `json:"registry"`
}

// newestRelease reads the release.json of the highest version under repo/releases.
func newestRelease(repo string) (releaseRecord, error) {
	versions, err := releasebuild.Versions(repo)
	if err != nil {
		return releaseRecord{}, err
	}
	if len(versions) == 0 {
		return releaseRecord{}, errors.New("no release under releases/: the catalog holds released versions only")
	}
	var r releaseRecord
	raw, err := os.ReadFile(filepath.Join(repo, releasesDir, versions[len(versions)-1].String(), "release.json"))
	if err == nil {
		err = json.Unmarshal(raw, &r)
	}
	return r, err
}

// catalogImage is the catalog image of the folder catalog (olm/catalog), labelled with the
// newest release r and stamped with its time: the same catalog and release give the same
// digest on any machine. It is one index over the product's platforms (the content is the same;
// each platform's configuration names its own).
func catalogImage(catalog string, r releaseRecord) (v1.ImageIndex, error) {
	at, err := time.Parse(time.RFC3339, r.Created)
	if err != nil {
		return nil, fmt.Errorf("release %s: created %q: %w", r.Version, r.Created, err)
	}
	stage, err := os.MkdirTemp("", "nexo-catalog-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(stage)
	if err := copyYAMLTree(catalog, filepath.Join(stage, "configs"), true); err != nil {
		return nil, err
	}
	layer, err := treeLayer(stage, []string{"configs"}, at)
	if err != nil {
		return nil, err
	}
	s := source{Version: r.Version, Commit: r.Commit, Time: at}
	lbl := labels(binary{Image: catalogImageName}, s)
	lbl["operators.operatorframework.io.index.configs.v1"] = catalogDir
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range platforms {
		img, err := ociImage(layer, p, v1.Config{Labels: lbl}, "hack/release: olm/catalog at "+catalogDir, at)
		if err != nil {
			return nil, err
		}
		platform := p
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &platform}})
	}
	return mutate.Annotations(idx, labels(binary{Image: catalogImageName}, s)).(v1.ImageIndex), nil
}

// publishCatalog builds the catalog image of repo/olm/catalog for the newest release, pushes it
// to registry/nexo-operator-catalog:v<version> and records it in releases/<version>/catalog.json.
// A record that names another digest is an error (the catalog changed after it was published:
// release a version instead); the same digest is pushed again, which a publication pipeline
// does for a release cut elsewhere.
func publishCatalog(repo, registry string, opts ...remote.Option) (*publishedImage, error) {
	r, err := newestRelease(repo)
	if err != nil {
		return nil, err
	}
	if registry == "" {
		registry = r.Registry
	}
	idx, err := catalogImage(filepath.Join(repo, "olm", "catalog"), r)
	if err != nil {
		return nil, err
	}
	d, err := idx.Digest()
	if err != nil {
		return nil, err
	}
	record := filepath.Join(repo, releasesDir, r.Version, catalogRecord)
	var prev publishedImage
	if raw, err := os.ReadFile(record); err == nil {
		if err := json.Unmarshal(raw, &prev); err != nil {
			return nil, fmt.Errorf("%s: %w", record, err)
		}
		if prev.Digest != d.String() {
			return nil, fmt.Errorf("%s names %s, but olm/catalog now builds %s: a published catalog is not replaced; release a new version", record, prev.Digest, d)
		}
	}
	tag, err := name.NewTag(registry + "/" + catalogImageName + ":v" + r.Version)
	if err != nil {
		return nil, err
	}
	if err := remote.WriteIndex(tag, idx, opts...); err != nil {
		return nil, fmt.Errorf("push %s: %w (nothing was recorded)", tag, err)
	}
	pub := &publishedImage{Name: catalogImageName, Reference: tag.Context().Digest(d.String()).String(), Digest: d.String(), Tag: tag.String()}
	raw, err := json.MarshalIndent(pub, "", "  ")
	if err != nil {
		return nil, err
	}
	return pub, os.WriteFile(record, append(raw, '\n'), 0o644)
}
