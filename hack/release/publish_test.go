package main

import (
	"archive/tar"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/nexo-io/nexo-edge/contract/buildinfo"
)

// cleanCheckout clones the repository's HEAD into a temp folder: a publication is made from a
// clean work tree, whatever state the developer's tree is in.
func cleanCheckout(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "src")
	root, _ := filepath.Abs("../..")
	if out, err := exec.Command("git", "clone", "-q", "--no-hardlinks", root, dir).CombinedOutput(); err != nil {
		t.Fatalf("git clone: %v\n%s", err, out)
	}
	return dir
}

// Publishing to a registry (go-containerregistry's, on loopback) pushes the image index; pulled
// back by digest it is the same index; its amd64 binary, extracted from the pulled image, runs
// and prints the release version and commit; every platform image has its SBOM as a referrer.
func TestPublishImagesToARegistry(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and pushes an image")
	}
	reg := httptest.NewServer(registry.New(registry.WithReferrersSupport(true), registry.Logger(log.New(io.Discard, "", 0))))
	defer reg.Close()
	host := strings.TrimPrefix(reg.URL, "http://") + "/nexo"
	repo := cleanCheckout(t)
	pub, err := publishImages(repo, t.TempDir(), host, buildinfo.Version, []string{"controlplane"})
	if err != nil {
		t.Fatal(err)
	}
	if len(pub.Images) != 1 || pub.Images[0].Name != "nexo-controlplane" || len(pub.Images[0].Platforms) != len(platforms) {
		t.Fatalf("published %+v", pub)
	}
	head, _ := exec.Command("git", "-C", repo, "rev-parse", "HEAD").Output()
	if pub.Commit != strings.TrimSpace(string(head)) {
		t.Errorf("publication names commit %q, the checkout is at %q", pub.Commit, head)
	}
	im := pub.Images[0]
	ref, err := name.ParseReference(im.Reference)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := remote.Index(ref)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := idx.Digest(); d.String() != im.Digest {
		t.Fatalf("pulled index %s, published %s", d, im.Digest)
	}
	tag, err := name.ParseReference(im.Tag)
	if err != nil {
		t.Fatal(err)
	}
	if byTag, err := remote.Index(tag); err != nil {
		t.Errorf("pull %s: %v", im.Tag, err)
	} else if d, _ := byTag.Digest(); d.String() != im.Digest {
		t.Errorf("the tag %s names %s, not the published digest", im.Tag, d)
	}
	for _, p := range im.Platforms {
		digest := ref.Context().Digest(p.Digest)
		refs, err := remote.Referrers(digest)
		if err != nil {
			t.Fatal(err)
		}
		rm, err := refs.IndexManifest()
		if err != nil || len(rm.Manifests) != 1 || rm.Manifests[0].Digest.String() != p.SBOM || rm.Manifests[0].ArtifactType != string(sbomType) {
			t.Fatalf("%s referrers %+v (%v), want the SBOM %s", p.Platform, rm, err, p.SBOM)
		}
		art, err := remote.Image(ref.Context().Digest(p.SBOM))
		if err != nil {
			t.Fatal(err)
		}
		layers, _ := art.Layers()
		rc, err := layers[0].Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		var bom struct {
			BOMFormat  string `json:"bomFormat"`
			Components []struct {
				Name string `json:"name"`
			} `json:"components"`
			Metadata struct {
				Component struct{ Name, Version string }
			}
		}
		if err := json.NewDecoder(rc).Decode(&bom); err != nil {
			t.Fatal(err)
		}
		rc.Close()
		names := ""
		for _, c := range bom.Components {
			names += c.Name + " "
		}
		if bom.BOMFormat != "CycloneDX" || bom.Metadata.Component.Name != "nexo-controlplane" || bom.Metadata.Component.Version != buildinfo.Version ||
			!strings.Contains(names, "modernc.org/sqlite") || !strings.Contains(names, "github.com/spf13/cobra") {
			t.Errorf("%s SBOM: %+v", p.Platform, bom.Metadata)
		}
		if p.Platform != "linux/"+runtime.GOARCH {
			continue
		}
		img, err := remote.Image(digest)
		if err != nil {
			t.Fatal(err)
		}
		exe := filepath.Join(t.TempDir(), "nexo-controlplane")
		extractFile(t, mutate.Extract(img), "nexo-controlplane", exe)
		out, err := exec.Command(exe, "--version").CombinedOutput()
		if err != nil || !strings.HasPrefix(strings.TrimSpace(string(out)), "nexo-controlplane "+buildinfo.Version+"+") ||
			!strings.HasSuffix(strings.TrimSpace(string(out)), "-"+pub.Commit[:12]) {
			t.Errorf("the pulled binary's --version: %q (%v); want version %s and commit %s", out, err, buildinfo.Version, pub.Commit[:12])
		}
	}
	// The record lists what was pushed, by digest.
	path := filepath.Join(t.TempDir(), "release.json")
	if err := writePublication(path, pub); err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(path)
	if !strings.Contains(string(raw), im.Digest) || !strings.Contains(string(raw), im.Platforms[0].SBOM) {
		t.Errorf("release.json:\n%s", raw)
	}
}

func extractFile(t *testing.T, rc io.ReadCloser, name, to string) {
	t.Helper()
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("%s not in the image: %v", name, err)
		}
		if h.Name == name {
			f, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY, 0o755)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(f, tr); err != nil {
				t.Fatal(err)
			}
			f.Close()
			return
		}
	}
}

// A publication refuses, before pushing anything: no version, another version than the
// build's, no registry, a dirty tree; and a registry that refuses a push is an error with no
// publication to record.
func TestPublishImagesRefuses(t *testing.T) {
	repo := cleanCheckout(t)
	for _, tc := range []struct{ name, registry, version, want string }{
		{"no version", "r.example/nexo", "", "VERSION is not set"},
		{"another version", "r.example/nexo", "9.9.9", "not this build's version " + buildinfo.Version},
		{"no registry", "", buildinfo.Version, "REGISTRY is not set"},
	} {
		if _, err := publishImages(repo, t.TempDir(), tc.registry, tc.version, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	if err := os.WriteFile(filepath.Join(repo, "README.md"), []byte("edited\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := publishImages(repo, t.TempDir(), "r.example/nexo", buildinfo.Version, nil); err == nil || !strings.Contains(err.Error(), "uncommitted changes") {
		t.Errorf("dirty tree: %v", err)
	}
	if out, err := exec.Command("git", "-C", repo, "checkout", "README.md").CombinedOutput(); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	if testing.Short() {
		return
	}
	// A registry that takes blobs but refuses manifests.
	inner := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/manifests/") {
			http.Error(w, `{"errors":[{"code":"DENIED","message":"push refused by policy"}]}`, http.StatusForbidden)
			return
		}
		inner.ServeHTTP(w, r)
	}))
	defer refusing.Close()
	pub, err := publishImages(repo, t.TempDir(), strings.TrimPrefix(refusing.URL, "http://")+"/nexo", buildinfo.Version, []string{"controlplane"})
	if err == nil || pub != nil || !strings.Contains(err.Error(), "nothing was recorded as published") || !strings.Contains(err.Error(), "DENIED") {
		t.Errorf("refusing registry: %v, %+v", err, pub)
	}
}
