package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// releasesDir keeps what every release published (docs/release.md, "Released artefacts").
const releasesDir = "releases"

// defaultImages are the image names the development tree (config/, the chart, the CSV) uses,
// which a release replaces by digest.
var defaultImages = map[string]string{
	"nexo-operator": "ghcr.io/nexo-io/nexo-operator",
	"nexo-manager":  "ghcr.io/nexo-io/nexo-manager",
}

// releaseVersion publishes version from the clean work tree at repo: the images with their
// SBOMs, then the bundle image, and only then writes releases/<version>/ (the CRDs, the chart,
// the bundle and the kustomize entry point, each naming the images by digest, and release.json)
// and regenerates the file-based catalog from releases/. A version already released is refused
// before anything is pushed; a push that fails leaves releases/ and the catalog untouched.
// pushedTo names the loopback registry that stands in for registry, if any (it is recorded).
func releaseVersion(repo, work, registry, version, pushedTo string, opts ...remote.Option) (*publication, error) {
	target := filepath.Join(repo, releasesDir, version)
	if version != "" {
		if _, err := os.Stat(target); err == nil {
			return nil, fmt.Errorf("%s/%s exists: %s is released, and a release is never replaced; bump catalog.BuildVersion for the next one", releasesDir, version, version)
		}
	}
	// The proxy image is not built here, but the bundle names it (relatedImages, the Manager's
	// NEXO_PROXY_IMAGE), by digest like the others: it must be published first.
	proxy, err := publishedProxyImage(registry, version, opts...)
	if err != nil {
		return nil, err
	}
	pub, err := publishImages(repo, work, registry, version, nil, opts...)
	if err != nil {
		return nil, err
	}
	if pub.GoToolchain, err = goToolchain(repo); err != nil {
		return nil, err
	}
	pub.ProxyImage = proxy
	d := digests{proxyImageName: proxy}
	for _, im := range pub.Images {
		d[im.Name] = im.Reference
	}
	s, err := sourceOf(repo, false)
	if err != nil {
		return nil, err
	}
	// nexoctl, for every platform, into dist/<version>/ and as one artifact.
	dist := filepath.Join(repo, "dist", version)
	files, err := buildArchives(repo, work, dist, s)
	if err != nil {
		return nil, err
	}
	arch, err := archivesArtifact(dist, files, s)
	if err != nil {
		return nil, err
	}
	archives, err := pushArtifact(arch, registry, archivesRepository, "v"+version, opts...)
	if err != nil {
		return nil, err
	}
	pub.Archives = &publishedArchives{publishedImage: *archives, Files: files}

	stage := filepath.Join(repo, releasesDir, "."+version+".staging")
	if err := os.RemoveAll(stage); err != nil {
		return nil, err
	}
	defer os.RemoveAll(stage)
	if err := writeReleaseTree(repo, stage, d, pub.Created); err != nil {
		return nil, err
	}
	if err := copyFile(filepath.Join(dist, checksumsFile), filepath.Join(stage, checksumsFile)); err != nil {
		return nil, err
	}
	// The released chart (values by digest) as Helm's OCI artifact.
	chart, chartVersion, err := chartArtifact(filepath.Join(stage, "chart", "nexo-edge"), s)
	if err != nil {
		return nil, err
	}
	if pub.Chart, err = pushArtifact(chart, registry, chartRepository, chartVersion, opts...); err != nil {
		return nil, err
	}
	img, err := bundleImage(filepath.Join(stage, "bundle"), s)
	if err != nil {
		return nil, err
	}
	if pub.Bundle, err = pushArtifact(img, registry, bundleImageName, "v"+version, opts...); err != nil {
		return nil, err
	}
	pub.PushedTo = pushedTo
	if err := writePublication(filepath.Join(stage, "release.json"), pub); err != nil {
		return nil, err
	}
	if err := os.Rename(stage, target); err != nil {
		return nil, err
	}
	// The catalog is derived from releases/: regenerate it, publish its image, and regenerate
	// again so olm/subscribe.yaml names that image by digest.
	if err := genpkgBundle(repo); err != nil {
		return pub, fmt.Errorf("released %s into %s, but %w", version, target, err)
	}
	if pub.Catalog, err = publishCatalog(repo, registry, opts...); err != nil {
		return pub, fmt.Errorf("released %s into %s, but publishing the catalog failed (run go run ./hack/release catalog): %w", version, target, err)
	}
	if err := genpkgBundle(repo); err != nil {
		return pub, fmt.Errorf("released %s into %s, but %w", version, target, err)
	}
	return pub, nil
}

// genpkgBundle regenerates the bundle, the catalog and olm/subscribe.yaml (make bundle).
func genpkgBundle(repo string) error {
	cmd := exec.Command("go", "run", "./hack/genpkg", "bundle")
	cmd.Dir = repo
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("regenerating the catalog failed (run make bundle): %v\n%s", err, out)
	}
	return nil
}

// goToolchain is the Go release that builds in repo (go env GOVERSION), recorded so a rebuild
// can use the same one.
func goToolchain(repo string) (string, error) {
	cmd := exec.Command("go", "env", "GOVERSION")
	cmd.Dir = repo
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go env GOVERSION: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

func copyFile(from, to string) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, data, 0o644)
}

// writeReleaseTree writes what a release keeps into dir, every product image by digest, the
// CSV created at the release's time:
//
//	crds/           the CRDs (config/crd/bases)
//	chart/nexo-edge the chart, values.yaml naming the images by digest
//	bundle/         the registry+v1 bundle, the CSV naming the images by digest
//	config/         the kustomize configuration (YAML only)
//	kustomization.yaml  config/default with images: by digest
func writeReleaseTree(repo, dir string, d digests, created string) error {
	copies := []struct{ from, to string }{
		{"config/crd/bases", "crds"},
		{"charts/nexo-edge", "chart/nexo-edge"},
		{"bundle", "bundle"},
		{"config", "config"},
	}
	for _, c := range copies {
		if err := copyYAMLTree(filepath.Join(repo, c.from), filepath.Join(dir, c.to), c.from == "config"); err != nil {
			return err
		}
	}
	stamps := []struct {
		path  string
		stamp func([]byte) ([]byte, error)
	}{
		{"bundle/manifests/nexo-operator.clusterserviceversion.yaml", func(b []byte) ([]byte, error) { return stampCSV(b, d, created) }},
		{"chart/nexo-edge/values.yaml", func(b []byte) ([]byte, error) { return stampValues(b, d) }},
	}
	for _, s := range stamps {
		p := filepath.Join(dir, s.path)
		raw, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out, err := s.stamp(raw)
		if err != nil {
			return fmt.Errorf("%s: %w", s.path, err)
		}
		if err := os.WriteFile(p, out, 0o644); err != nil {
			return err
		}
	}
	k, err := kustomization(d, defaultImages)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "kustomization.yaml"), k, 0o644)
}

// copyYAMLTree copies the folder src to dst; yamlOnly leaves out everything but YAML (config/
// also holds the Go files that embed it).
func copyYAMLTree(src, dst string, yamlOnly bool) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if yamlOnly && !strings.HasSuffix(p, ".yaml") {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
}

// redirect sends the requests for one registry host to another address over plain HTTP: a
// rehearsal, or a staging registry that stands in for the public one, receives exactly what
// the public registry would (the digests do not depend on where an image is pushed).
type redirect struct {
	host, to string
	base     http.RoundTripper
}

func (r redirect) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Host == r.host {
		req = req.Clone(req.Context())
		req.URL.Scheme, req.URL.Host, req.Host = "http", r.to, r.to
	}
	return r.base.RoundTrip(req)
}

// pushTo is the remote option that pushes REGISTRY's images to addr instead (empty: none).
func pushTo(registry, addr string) ([]remote.Option, error) {
	if addr == "" {
		return nil, nil
	}
	if !strings.HasPrefix(addr, "127.0.0.1:") && !strings.HasPrefix(addr, "localhost:") {
		return nil, errors.New("-push-to takes a loopback address (127.0.0.1:PORT): it is for rehearsals and a local stand-in registry")
	}
	repo, err := name.NewRepository(registry + "/x")
	if err != nil {
		return nil, err
	}
	return []remote.Option{remote.WithTransport(redirect{host: repo.RegistryStr(), to: addr, base: http.DefaultTransport}), remote.WithContext(context.Background())}, nil
}

// proxyImageName is the proxy runtime's image, which the proxy team publishes as
// <registry>/nexo-proxy:<version> before the operator's release (catalog.DefaultProxyImage).
const proxyImageName = "nexo-proxy"

// publishedProxyImage is registry/nexo-proxy:version by digest, or an error saying it must be
// published first.
func publishedProxyImage(registry, version string, opts ...remote.Option) (string, error) {
	tag, err := name.NewTag(registry + "/" + proxyImageName + ":" + version)
	if err != nil {
		return "", err
	}
	desc, err := remote.Head(tag, opts...)
	if err != nil {
		return "", fmt.Errorf("the proxy image %s is not published (%v): the bundle names it by digest, so it is published before the operator's release (docs/release.md); nothing was pushed", tag, err)
	}
	return tag.Context().Digest(desc.Digest.String()).String(), nil
}
