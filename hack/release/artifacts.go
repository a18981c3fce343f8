package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"helm.sh/helm/v3/pkg/chart/loader"
	helmregistry "helm.sh/helm/v3/pkg/registry"
)

// The release's artefacts beside the images (docs/release.md, "Released artefacts").
const (
	// chartRepository is where the chart is pushed under the registry, as `helm push
	// nexo-edge-x.y.z.tgz oci://REGISTRY/charts` does; its tag is the chart version.
	chartRepository = "charts/nexo-edge"
	// archivesRepository holds the nexoctl archives as one OCI artifact, each a layer titled with
	// its file name (`oras pull` writes them out).
	archivesRepository = "nexoctl"
	archivesType       = "application/vnd.nexo.nexoctl.archives.v1+json"
	archiveMediaType   = "application/vnd.nexo.nexoctl.archive.v1.tar+gzip"
	checksumsMediaType = "text/plain"
	checksumsFile      = "SHA256SUMS"
)

// cliPlatforms are the ones nexoctl is released for.
var cliPlatforms = []v1.Platform{
	{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64"},
	{OS: "darwin", Architecture: "amd64"}, {OS: "darwin", Architecture: "arm64"},
}

// archiveFile is one nexoctl archive of a release.
type archiveFile struct {
	Name     string `json:"name"`
	Platform string `json:"platform"`
	SHA256   string `json:"sha256"`
	Size     int64  `json:"size"`
}

// publishedArchives is the nexoctl archives' artifact and its files.
type publishedArchives struct {
	publishedImage
	Files []archiveFile `json:"files"`
}

// gzipTar is a gzip-compressed tar of files (name → content, mode), in the given order, every
// entry owned by root at the time at; the gzip header carries no name or time, so the same input
// gives the same bytes.
func gzipTar(order []string, files map[string][]byte, modes map[string]int64, at time.Time) ([]byte, error) {
	var b bytes.Buffer
	gz, err := gzip.NewWriterLevel(&b, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(gz)
	for _, n := range order {
		hdr := &tar.Header{Name: n, Mode: modes[n], Size: int64(len(files[n])), ModTime: at, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(files[n]); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// buildArchives cross-compiles nexoctl for every cliPlatform and writes one archive each into
// out (nexoctl_<version>_<os>_<arch>.tar.gz: the binary and README.md), with SHA256SUMS beside
// them in sha256sum's format. One commit gives the same archives.
func buildArchives(repo, work, out string, s source) ([]archiveFile, error) {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	readme, err := os.ReadFile(filepath.Join(repo, "README.md"))
	if err != nil {
		return nil, err
	}
	var files []archiveFile
	var sums strings.Builder
	for _, p := range cliPlatforms {
		exe := filepath.Join(work, "nexoctl-"+p.OS+"-"+p.Architecture)
		if err := buildBinary(repo, "nexoctl", p, s, exe); err != nil {
			return nil, err
		}
		data, err := os.ReadFile(exe)
		if err != nil {
			return nil, err
		}
		archive, err := gzipTar([]string{"nexoctl", "README.md"}, map[string][]byte{"nexoctl": data, "README.md": readme},
			map[string]int64{"nexoctl": 0o755, "README.md": 0o644}, s.Time)
		if err != nil {
			return nil, err
		}
		f := archiveFile{Name: fmt.Sprintf("nexoctl_%s_%s_%s.tar.gz", s.Version, p.OS, p.Architecture), Platform: p.OS + "/" + p.Architecture, Size: int64(len(archive))}
		sum := sha256.Sum256(archive)
		f.SHA256 = hex.EncodeToString(sum[:])
		if err := os.WriteFile(filepath.Join(out, f.Name), archive, 0o644); err != nil {
			return nil, err
		}
		fmt.Fprintf(&sums, "%s  %s\n", f.SHA256, f.Name)
		files = append(files, f)
	}
	return files, os.WriteFile(filepath.Join(out, checksumsFile), []byte(sums.String()), 0o644)
}

// archivesArtifact is the OCI artifact of the archives in dir: its config media type names the
// artifact type, and each archive and SHA256SUMS is a layer titled with its file name.
func archivesArtifact(dir string, files []archiveFile, s source) (v1.Image, error) {
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), archivesType)
	for _, f := range append(files, archiveFile{Name: checksumsFile}) {
		data, err := os.ReadFile(filepath.Join(dir, f.Name))
		if err != nil {
			return nil, err
		}
		mt := types.MediaType(archiveMediaType)
		if f.Name == checksumsFile {
			mt = checksumsMediaType
		}
		if img, err = mutate.Append(img, mutate.Addendum{Layer: static.NewLayer(data, mt),
			Annotations: map[string]string{"org.opencontainers.image.title": f.Name}}); err != nil {
			return nil, err
		}
	}
	return mutate.Annotations(img, map[string]string{
		"org.opencontainers.image.created": s.Time.Format(time.RFC3339), "org.opencontainers.image.version": s.Version,
		"org.opencontainers.image.revision": s.Commit, "org.opencontainers.image.source": sourceRepo,
	}).(v1.Image), nil
}

// chartArtifact is the chart folder dir as Helm's OCI artifact (what `helm push` makes): the
// Chart.yaml metadata as the config, the packaged chart as the one layer. The package is
// written here rather than by helm's chartutil.Save, so the same chart gives the same digest.
func chartArtifact(dir string, s source) (v1.Image, string, error) {
	ch, err := loader.LoadDir(dir)
	if err != nil {
		return nil, "", err
	}
	files := map[string][]byte{}
	modes := map[string]int64{}
	var order []string
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		n := ch.Metadata.Name + "/" + filepath.ToSlash(rel)
		if files[n], err = os.ReadFile(p); err != nil {
			return err
		}
		modes[n] = 0o644
		order = append(order, n)
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	pkg, err := gzipTar(order, files, modes, s.Time)
	if err != nil {
		return nil, "", err
	}
	// The package must load as helm loads a pulled chart.
	if _, err := loader.LoadArchive(bytes.NewReader(pkg)); err != nil {
		return nil, "", fmt.Errorf("the packaged chart does not load: %w", err)
	}
	meta, err := json.Marshal(ch.Metadata)
	if err != nil {
		return nil, "", err
	}
	layer := static.NewLayer(pkg, helmregistry.ChartLayerMediaType)
	img, err := artifact(meta, helmregistry.ConfigMediaType, []v1.Layer{layer}, map[string]string{
		"org.opencontainers.image.title": ch.Metadata.Name, "org.opencontainers.image.version": ch.Metadata.Version,
		"org.opencontainers.image.description": ch.Metadata.Description, "org.opencontainers.image.created": s.Time.Format(time.RFC3339),
	})
	return img, ch.Metadata.Version, err
}

// artifactImage is an OCI image manifest whose config blob is not an image configuration (a
// Helm chart's metadata): go-containerregistry's mutate only writes image configurations.
type artifactImage struct {
	config   []byte
	manifest []byte
	layers   map[v1.Hash]v1.Layer
}

// artifact is the OCI manifest of config (of media type configType) and layers, with
// annotations.
func artifact(config []byte, configType types.MediaType, layers []v1.Layer, annotations map[string]string) (v1.Image, error) {
	m := v1.Manifest{SchemaVersion: 2, MediaType: types.OCIManifestSchema1, Annotations: annotations,
		Config: v1.Descriptor{MediaType: configType, Size: int64(len(config))}}
	var err error
	if m.Config.Digest, _, err = v1.SHA256(bytes.NewReader(config)); err != nil {
		return nil, err
	}
	a := &artifactImage{config: config, layers: map[v1.Hash]v1.Layer{}}
	for _, l := range layers {
		d, err := partial.Descriptor(l)
		if err != nil {
			return nil, err
		}
		m.Layers = append(m.Layers, *d)
		a.layers[d.Digest] = l
	}
	if a.manifest, err = json.Marshal(m); err != nil {
		return nil, err
	}
	return partial.CompressedToImage(a)
}

func (a *artifactImage) RawConfigFile() ([]byte, error)      { return a.config, nil }
func (a *artifactImage) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }
func (a *artifactImage) RawManifest() ([]byte, error)        { return a.manifest, nil }
func (a *artifactImage) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	if l, ok := a.layers[h]; ok {
		return l, nil
	}
	return nil, fmt.Errorf("blob %s is not in this artifact", h)
}

// pushArtifact pushes img to registry/repository:tag and returns it by digest.
func pushArtifact(img v1.Image, registry, repository, tag string, opts ...remote.Option) (*publishedImage, error) {
	t, err := name.NewTag(registry + "/" + repository + ":" + tag)
	if err != nil {
		return nil, err
	}
	if err := remote.Write(t, img, opts...); err != nil {
		return nil, fmt.Errorf("push %s: %w (nothing was recorded as released)", t, err)
	}
	d, err := img.Digest()
	if err != nil {
		return nil, err
	}
	return &publishedImage{Name: repository, Reference: t.Context().Digest(d.String()).String(), Digest: d.String(), Tag: t.String()}, nil
}
