package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/nexo-io/nexo-edge/contract/buildinfo"
)

// publication is what dist/release.json lists: every artifact a publication pushed, by digest.
type publication struct {
	Version  string `json:"version"`
	Commit   string `json:"commit"`
	Created  string `json:"created"`
	Registry string `json:"registry"`
	// PushedTo is the loopback registry that stood in for Registry (release -push-to), if any.
	PushedTo string           `json:"pushedTo,omitempty"`
	Images   []publishedImage `json:"images"`
	// ProxyImage is the proxy runtime's image by digest, which the bundle names (make release;
	// the proxy team publishes it, not this repository).
	ProxyImage string `json:"proxyImage,omitempty"`
	// Bundle is the registry+v1 bundle image (make release; publish-images pushes none).
	Bundle *publishedImage `json:"bundle,omitempty"`
	// GoToolchain built every binary (go env GOVERSION).
	GoToolchain string `json:"goToolchain,omitempty"`
	// Chart is the released chart as Helm's OCI artifact (helm pull oci://…).
	Chart *publishedImage `json:"chart,omitempty"`
	// Archives are the nexoctl archives, each with its checksum, and their OCI artifact.
	Archives *publishedArchives `json:"archives,omitempty"`
	// Catalog is the catalog image published with this release (also in catalog.json, which
	// olm/subscribe.yaml is generated from); not in release.json, which is written before it.
	Catalog *publishedImage `json:"-"`
}

type publishedImage struct {
	Name string `json:"name"`
	// Reference is the image by digest (registry/name@sha256:…); Tag names the same index.
	Reference string              `json:"reference"`
	Digest    string              `json:"digest"`
	Tag       string              `json:"tag"`
	Platforms []publishedPlatform `json:"platforms,omitempty"`
}

type publishedPlatform struct {
	Platform string `json:"platform"`
	Digest   string `json:"digest"`
	// SBOM is the digest of the CycloneDX SBOM attached to this image as a referrer.
	SBOM string `json:"sbom"`
}

// publishImages builds the images of the named binaries (all when only is empty) from the clean
// work tree at repo, pushes each to registry/<image>:<version>, attaches the CycloneDX SBOM of
// each platform's binary as a referrer, and returns what was published. version must be this
// build's (catalog.BuildVersion). Nothing is returned, and so nothing recorded, unless every
// push succeeded.
func publishImages(repo, work, registry, version string, only []string, opts ...remote.Option) (*publication, error) {
	switch {
	case version == "":
		return nil, errors.New("VERSION is not set: make publish-images VERSION=x.y.z REGISTRY=host/path")
	case version != buildinfo.Version:
		return nil, fmt.Errorf("VERSION %s is not this build's version %s: the version is written once, as catalog.BuildVersion; change it there, run make generate manifests chart bundle, commit, then publish", version, buildinfo.Version)
	case registry == "":
		return nil, errors.New("REGISTRY is not set: make publish-images VERSION=x.y.z REGISTRY=host/path")
	}
	if _, err := name.NewRepository(registry + "/nexo-operator"); err != nil {
		return nil, fmt.Errorf("REGISTRY %q: %w", registry, err)
	}
	s, err := sourceOf(repo, true)
	if err != nil {
		return nil, err
	}
	pub := &publication{Version: version, Commit: s.Commit, Created: s.Time.Format("2006-01-02T15:04:05Z"), Registry: registry}
	for _, b := range binaries {
		if len(only) > 0 && !slices.Contains(only, b.Name) {
			continue
		}
		img, err := buildImage(repo, work, b, s)
		if err != nil {
			return nil, err
		}
		published, err := push(img, registry, s, opts...)
		if err != nil {
			return nil, err
		}
		pub.Images = append(pub.Images, *published)
	}
	return pub, nil
}

// push writes one image index and the SBOM referrers of its platform images.
func push(b *built, registry string, s source, opts ...remote.Option) (*publishedImage, error) {
	tag, err := name.NewTag(registry + "/" + b.Image + ":" + s.Version)
	if err != nil {
		return nil, err
	}
	if err := remote.WriteIndex(tag, b.Index, opts...); err != nil {
		return nil, fmt.Errorf("push %s: %w (nothing was recorded as published)", tag, err)
	}
	digest, err := b.Index.Digest()
	if err != nil {
		return nil, err
	}
	out := &publishedImage{Name: b.Image, Reference: tag.Context().Digest(digest.String()).String(), Digest: digest.String(), Tag: tag.String()}
	im, err := b.Index.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, d := range im.Manifests {
		platform := d.Platform.OS + "/" + d.Platform.Architecture
		sbom, err := sbomOf(b.Exes[platform], b.binary, s)
		if err != nil {
			return nil, err
		}
		art, err := sbomArtifact(sbom, v1.Descriptor{MediaType: d.MediaType, Digest: d.Digest, Size: d.Size}, s)
		if err != nil {
			return nil, err
		}
		artDigest, err := art.Digest()
		if err != nil {
			return nil, err
		}
		if err := remote.Write(tag.Context().Digest(artDigest.String()), art, opts...); err != nil {
			return nil, fmt.Errorf("push the SBOM of %s %s: %w (nothing was recorded as published)", b.Image, platform, err)
		}
		out.Platforms = append(out.Platforms, publishedPlatform{Platform: platform, Digest: d.Digest.String(), SBOM: artDigest.String()})
	}
	return out, nil
}

// writePublication writes release.json.
func writePublication(path string, pub *publication) error {
	raw, err := json.MarshalIndent(pub, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, append(raw, '\n'), 0o644)
}
