package main

import (
	"archive/tar"
	"io"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/nexo-io/nexo-edge/contract/buildinfo"
)

// Two builds of the same commit are the same image, byte for byte: the index digest written to
// the layout is equal. The image has the promised shape, and its binary prints the release
// version and commit.
func TestImagesAreReproducible(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-compiles a binary twice")
	}
	// Two real builds: the first may be kept for the other tests (or copied from an earlier
	// real build of the same inputs), the second is linked again whatever is kept.
	kept := reuse
	t.Cleanup(func() { reuse = kept })
	repo, _ := filepath.Abs("../..")
	s, err := sourceOf(repo, false)
	if err != nil {
		t.Fatal(err)
	}
	cp := binary{Name: "controlplane", Image: "nexo-controlplane"}
	var digests []string
	var first *built
	for i := range 2 {
		if i == 1 {
			reuse = ""
		}
		b, err := buildImage(repo, t.TempDir(), cp, s)
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(t.TempDir(), "oci")
		if err := writeLayout(dir, []*built{b}, s.Version); err != nil {
			t.Fatal(err)
		}
		// Read back from the layout, as a registry or a runtime would.
		p, err := layout.FromPath(dir)
		if err != nil {
			t.Fatal(err)
		}
		top, err := p.ImageIndex()
		if err != nil {
			t.Fatal(err)
		}
		m, err := top.IndexManifest()
		if err != nil || len(m.Manifests) != 1 || m.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "nexo-controlplane:"+s.Version {
			t.Fatalf("layout index %+v, %v", m, err)
		}
		digests = append(digests, m.Manifests[0].Digest.String())
		if i == 0 {
			first = b
		}
	}
	if digests[0] != digests[1] {
		t.Fatalf("two builds of commit %s differ: %s and %s", s.Commit, digests[0], digests[1])
	}

	im, err := first.Index.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != len(platforms) {
		t.Fatalf("%d platforms, want %d", len(im.Manifests), len(platforms))
	}
	for _, d := range im.Manifests {
		img, err := first.Index.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		c := cfg.Config
		if c.User != "65532:65532" || len(c.Entrypoint) != 1 || c.Entrypoint[0] != "/nexo-controlplane" || len(c.Env) != 0 ||
			c.Labels["org.opencontainers.image.version"] != s.Version || c.Labels["org.opencontainers.image.revision"] != s.Commit ||
			cfg.Architecture != d.Platform.Architecture || !cfg.Created.Time.Equal(s.Time) {
			t.Errorf("%s config %+v (created %s)", d.Platform.Architecture, c, cfg.Created)
		}
		layers, err := img.Layers()
		if err != nil || len(layers) != 1 {
			t.Fatalf("%d layers, %v", len(layers), err)
		}
		rc, err := layers[0].Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		var names []string
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			} else if err != nil {
				t.Fatal(err)
			}
			names = append(names, h.Name)
			if h.Mode != 0o755 || h.Uid != 0 || !h.ModTime.Equal(s.Time) {
				t.Errorf("%s: mode %o uid %d time %s", h.Name, h.Mode, h.Uid, h.ModTime)
			}
		}
		rc.Close()
		if len(names) != 1 || names[0] != "nexo-controlplane" {
			t.Errorf("%s layer holds %v, want only the binary (no shell)", d.Platform.Architecture, names)
		}
	}
	exe := first.Exes["linux/"+runtime.GOARCH]
	out, err := exec.Command(exe, "--version").CombinedOutput()
	want := "nexo-controlplane " + s.Version + "+" + s.stamp() + "-" + shortCommit(s.Commit)
	if err != nil || strings.TrimSpace(string(out)) != want {
		t.Errorf("--version: %q, %v; want %q", out, err, want)
	}
	if !strings.HasPrefix(want, "nexo-controlplane "+buildinfo.Version+"+") {
		t.Errorf("the image's version is not the catalog's")
	}
}
