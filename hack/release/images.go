package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/nexo-io/nexo-edge/contract/buildinfo"
)

// A product image: one static binary at /<image name>, run as a non-root numeric user, with no
// shell or anything else (the Manager carries its CA roots in the binary). This file is the one
// source of the images' shape; there is no Dockerfile (docs/release.md).
const (
	imageUser  = "65532:65532"
	sourceRepo = "https://github.com/nexo-io/nexo-edge"
)

// binary is a product binary and the image it ships in.
type binary struct {
	Name  string // the cmd/ folder
	Image string // the repository name under the registry
}

// binaries are the images a release publishes.
var binaries = []binary{
	{"operator", "nexo-operator"},
	{"manager", "nexo-manager"},
	{"controlplane", "nexo-controlplane"},
}

// platforms are the ones every image is built for.
var platforms = []v1.Platform{{OS: "linux", Architecture: "amd64"}, {OS: "linux", Architecture: "arm64"}}

// source is what a build is made from: the commit and its time, which stand in for every
// timestamp, so the same commit gives the same bytes.
type source struct {
	Version string
	Commit  string
	Time    time.Time
}

// sourceOf reads the commit of the work tree in dir; a dirty tree is refused when clean is set
// (a release), and stamped "-dirty" otherwise (a local make images).
func sourceOf(dir string, clean bool) (source, error) {
	git := func(args ...string) (string, error) {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		out, err := cmd.Output()
		return strings.TrimSpace(string(out)), err
	}
	commit, err := git("rev-parse", "HEAD")
	if err != nil {
		return source{}, fmt.Errorf("read the source commit (a release is built from a git checkout): %w", err)
	}
	unix, err := git("log", "-1", "--format=%ct")
	if err != nil {
		return source{}, err
	}
	var secs int64
	if _, err := fmt.Sscan(unix, &secs); err != nil {
		return source{}, fmt.Errorf("commit time %q: %w", unix, err)
	}
	status, err := git("status", "--porcelain", "--untracked-files=no")
	if err != nil {
		return source{}, err
	}
	if status != "" {
		if clean {
			return source{}, fmt.Errorf("the work tree has uncommitted changes; commit or stash them first (a release names exactly one commit):\n%s", status)
		}
		commit += "-dirty"
	}
	return source{Version: buildinfo.Version, Commit: commit, Time: time.Unix(secs, 0).UTC()}, nil
}

// stamp is the build stamp of s: the commit time, so rebuilding the same commit stamps the same.
func (s source) stamp() string { return s.Time.Format("20060102.1504") }

// reuse, when set, is a folder where buildBinary keeps what it built, by what decides the bytes
// (binary, platform, version, commit, time), and copies from instead of linking the same binary
// again. A release builds each binary once and leaves it unset; the tests, which release the
// same commit several times, set it (TestMain), and the reproducibility test unsets it to build
// twice for real.
var reuse string

// buildBinary cross-compiles cmd/<name> for a platform: static, -trimpath, stripped, no build
// id, stamped with the version and commit.
func buildBinary(repo, name string, p v1.Platform, s source, out string) error {
	var kept string
	if reuse != "" {
		kept = filepath.Join(reuse, fmt.Sprintf("%s-%s-%s-%s-%s-%d", name, p.OS, p.Architecture, s.Version, strings.ReplaceAll(s.Commit, "/", "_"), s.Time.Unix()))
		if data, err := os.ReadFile(kept); err == nil {
			return os.WriteFile(out, data, 0o755)
		}
	}
	if err := compileBinary(repo, name, p, s, out); err != nil {
		return err
	}
	if kept != "" {
		data, err := os.ReadFile(out)
		if err != nil {
			return err
		}
		return os.WriteFile(kept, data, 0o755)
	}
	return nil
}

// compileBinary runs go build for buildBinary.
func compileBinary(repo, name string, p v1.Platform, s source, out string) error {
	cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false",
		"-ldflags", "-s -w -buildid= "+buildinfo.LinkFlags(s.stamp(), shortCommit(s.Commit)),
		"-o", out, "./cmd/"+name)
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+p.OS, "GOARCH="+p.Architecture, "GOFLAGS=")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/%s for %s/%s: %v\n%s", name, p.OS, p.Architecture, err, b)
	}
	return nil
}

func shortCommit(c string) string {
	if len(c) > 12 && !strings.HasSuffix(c, "-dirty") {
		return c[:12]
	}
	return c
}

// layerOf is a layer holding one file, /<name> (mode 0755, owned by root), with every timestamp
// at the commit's time.
func layerOf(name string, data []byte, at time.Time) (v1.Layer, error) {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	hdr := &tar.Header{Name: name, Mode: 0o755, Size: int64(len(data)), ModTime: at, Typeflag: tar.TypeReg, Format: tar.FormatPAX}
	if err := tw.WriteHeader(hdr); err != nil {
		return nil, err
	}
	if _, err := tw.Write(data); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	raw := b.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(raw)), nil },
		tarball.WithMediaType(types.OCILayer))
}

// imageOf is the single-platform image of a built binary.
func imageOf(b binary, p v1.Platform, exe []byte, s source) (v1.Image, error) {
	layer, err := layerOf(b.Image, exe, s.Time)
	if err != nil {
		return nil, err
	}
	config := v1.Config{Entrypoint: []string{"/" + b.Image}, User: imageUser, WorkingDir: "/", Labels: labels(b, s)}
	return ociImage(layer, p, config, "hack/release: /"+b.Image+" (go build ./cmd/"+b.Name+")", s.Time)
}

// ociImage is a one-layer OCI image for platform p with config and one history entry, every
// timestamp at.
func ociImage(layer v1.Layer, p v1.Platform, config v1.Config, createdBy string, at time.Time) (v1.Image, error) {
	img, err := mutate.AppendLayers(mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON), layer)
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture, cfg.Created = p.OS, p.Architecture, v1.Time{Time: at}
	cfg.Config = config
	cfg.History = []v1.History{{Created: v1.Time{Time: at}, CreatedBy: createdBy}}
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return nil, err
	}
	return mutate.CreatedAt(img, v1.Time{Time: at})
}

// labels are the OCI annotations every image and index carries.
func labels(b binary, s source) map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":    b.Image,
		"org.opencontainers.image.version":  s.Version,
		"org.opencontainers.image.revision": s.Commit,
		"org.opencontainers.image.source":   sourceRepo,
		"org.opencontainers.image.created":  s.Time.Format(time.RFC3339),
		"org.opencontainers.image.licenses": "Apache-2.0",
	}
}

// built is one binary's multi-platform image, and the binaries it was made of (by platform),
// which the SBOM and the release test read.
type built struct {
	binary
	Index v1.ImageIndex
	Exes  map[string]string // "linux/amd64" -> path of the built binary
}

// buildImage builds b for every platform into an OCI image index; the binaries are kept in
// work.
func buildImage(repo, work string, b binary, s source) (*built, error) {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	out := &built{binary: b, Exes: map[string]string{}}
	for _, p := range platforms {
		exe := filepath.Join(work, b.Name+"-"+p.OS+"-"+p.Architecture)
		if err := buildBinary(repo, b.Name, p, s, exe); err != nil {
			return nil, err
		}
		data, err := os.ReadFile(exe)
		if err != nil {
			return nil, err
		}
		img, err := imageOf(b, p, data, s)
		if err != nil {
			return nil, err
		}
		platform := p
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &platform}})
		out.Exes[p.OS+"/"+p.Architecture] = exe
	}
	out.Index = mutate.Annotations(idx, labels(b, s)).(v1.ImageIndex)
	return out, nil
}

// writeLayout writes the images into one OCI image layout at dir (replacing it), each index
// named by its image and version (org.opencontainers.image.ref.name).
func writeLayout(dir string, images []*built, version string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	for _, b := range images {
		if err := p.AppendIndex(b.Index, layout.WithAnnotations(map[string]string{
			"org.opencontainers.image.ref.name": b.Image + ":" + version,
		})); err != nil {
			return err
		}
	}
	return nil
}
