package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/crane"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	"helm.sh/helm/v3/pkg/chart/loader"
	helmregistry "helm.sh/helm/v3/pkg/registry"
)

// checkReleaseRecord: release.json names the Go toolchain that built the release and the
// registry it was pushed to; the released CSV was created at the release's time.
func checkReleaseRecord(t *testing.T, dir string, pub *publication, csv *operatorsv1alpha1.ClusterServiceVersion) {
	t.Helper()
	var rec map[string]any
	raw, err := os.ReadFile(filepath.Join(dir, "release.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &rec); err != nil {
		t.Fatal(err)
	}
	if rec["goToolchain"] != runtime.Version() || rec["registry"] != pub.Registry || pub.Registry == "" {
		t.Errorf("release.json: goToolchain %v (this test runs %s), registry %v", rec["goToolchain"], runtime.Version(), rec["registry"])
	}
	if csv.Annotations["createdAt"] != pub.Created {
		t.Errorf("the released CSV's createdAt is %q, want the release's %q", csv.Annotations["createdAt"], pub.Created)
	}
}

// checkArchives: one nexoctl archive per platform in dist/<version>/, each listed in SHA256SUMS
// (kept in releases/<version>/ too) with its real checksum; the artifact pulled back by digest
// holds the same files; this machine's archive runs.
func checkArchives(t *testing.T, repo, dir string, pub *publication) {
	t.Helper()
	if pub.Archives == nil || len(pub.Archives.Files) != len(cliPlatforms) {
		t.Fatalf("archives: %+v", pub.Archives)
	}
	dist := filepath.Join(repo, "dist", pub.Version)
	sums, err := os.ReadFile(filepath.Join(dist, checksumsFile))
	if err != nil {
		t.Fatal(err)
	}
	kept, err := os.ReadFile(filepath.Join(dir, checksumsFile))
	if err != nil || !bytes.Equal(sums, kept) {
		t.Errorf("releases/%s/%s is not dist's: %v", pub.Version, checksumsFile, err)
	}
	files := map[string][]byte{}
	for _, f := range pub.Archives.Files {
		data, err := os.ReadFile(filepath.Join(dist, f.Name))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(data)
		if hex.EncodeToString(sum[:]) != f.SHA256 || !strings.Contains(string(sums), f.SHA256+"  "+f.Name+"\n") {
			t.Errorf("%s: checksum %x, recorded %s", f.Name, sum, f.SHA256)
		}
		files[f.Name] = data
	}
	ref, err := name.NewDigest(pub.Archives.Reference)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(ref)
	if err != nil {
		t.Fatal(err)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.Config.MediaType != archivesType || len(m.Layers) != len(cliPlatforms)+1 {
		t.Fatalf("the archives artifact: config %s, %d layers", m.Config.MediaType, len(m.Layers))
	}
	for _, l := range m.Layers {
		title := l.Annotations["org.opencontainers.image.title"]
		want := files[title]
		if title == checksumsFile {
			want = sums
		}
		sum := sha256.Sum256(want)
		if want == nil || l.Digest.Hex != hex.EncodeToString(sum[:]) {
			t.Errorf("artifact layer %q has digest %s", title, l.Digest)
		}
	}
	// This machine's archive: extract nexoctl and run it.
	mine := filepath.Join(dist, "nexoctl_"+pub.Version+"_"+runtime.GOOS+"_"+runtime.GOARCH+".tar.gz")
	gz, err := gzip.NewReader(bytes.NewReader(files[filepath.Base(mine)]))
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(t.TempDir(), "nexoctl")
	extractFile(t, io.NopCloser(gz), "nexoctl", exe)
	out, err := exec.Command(exe, "version", "--client").CombinedOutput()
	if err != nil || !strings.Contains(string(out), pub.Version) {
		t.Errorf("nexoctl version from the archive: %q %v", out, err)
	}
}

// checkChart: Helm's own registry client pulls the chart by the recorded digest; it loads, and
// its values name the released images by digest.
func checkChart(t *testing.T, pub *publication, d digests) {
	t.Helper()
	if pub.Chart == nil {
		t.Fatal("no chart artifact recorded")
	}
	client, err := helmregistry.NewClient(helmregistry.ClientOptPlainHTTP())
	if err != nil {
		t.Fatal(err)
	}
	res, err := client.Pull(pub.Chart.Reference)
	if err != nil {
		t.Fatalf("helm pull %s: %v", pub.Chart.Reference, err)
	}
	if res.Manifest.Digest != pub.Chart.Digest {
		t.Errorf("helm pulled manifest %s, recorded %s", res.Manifest.Digest, pub.Chart.Digest)
	}
	ch, err := loader.LoadArchive(bytes.NewReader(res.Chart.Data))
	if err != nil {
		t.Fatal(err)
	}
	if ch.Metadata.Version != pub.Version {
		t.Errorf("the pulled chart is version %s", ch.Metadata.Version)
	}
	values, _ := json.Marshal(ch.Values)
	for _, image := range []string{"nexo-operator", "nexo-manager"} {
		digest := d[image][strings.Index(d[image], "@")+1:]
		if !strings.Contains(string(values), digest) {
			t.Errorf("the pulled chart's values do not name %s by %s", image, digest)
		}
	}
}

// checkCatalog: the catalog image pulls back by the digest releases/<version>/catalog.json
// records, holds the tree's olm/catalog (now with this version) under /configs, and
// olm/subscribe.yaml names it and starts at this version.
func checkCatalog(t *testing.T, repo, dir string, pub *publication) {
	t.Helper()
	if pub.Catalog == nil {
		t.Fatal("no catalog image published")
	}
	raw, err := os.ReadFile(filepath.Join(dir, catalogRecord))
	if err != nil || !strings.Contains(string(raw), pub.Catalog.Reference) {
		t.Fatalf("%s: %s %v", catalogRecord, raw, err)
	}
	ref, err := name.NewDigest(pub.Catalog.Reference)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := remote.Index(ref)
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil || len(im.Manifests) != len(platforms) {
		t.Fatalf("catalog index: %v %v", im, err)
	}
	img, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	var inImage bytes.Buffer
	extractTo(t, mutate.Extract(img), "configs/nexo-operator/catalog.yaml", &inImage)
	tree, _ := os.ReadFile(filepath.Join(repo, "olm/catalog/nexo-operator/catalog.yaml"))
	if !bytes.Equal(inImage.Bytes(), tree) || !strings.Contains(string(tree), "name: nexo-operator.v"+pub.Version) {
		t.Error("the catalog image does not hold the tree's olm/catalog with this version")
	}
	sub, _ := os.ReadFile(filepath.Join(repo, "olm/subscribe.yaml"))
	if !strings.Contains(string(sub), "image: "+pub.Catalog.Reference) || !strings.Contains(string(sub), "startingCSV: nexo-operator.v"+pub.Version) {
		t.Errorf("olm/subscribe.yaml does not name the published catalog and this version:\n%s", sub)
	}
	// Building it again from the tree gives the recorded digest.
	r, err := newestRelease(repo)
	if err != nil {
		t.Fatal(err)
	}
	again, err := catalogImage(filepath.Join(repo, "olm", "catalog"), r)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := again.Digest(); d.String() != pub.Catalog.Digest {
		t.Errorf("the catalog image rebuilt is %s, published %s", d, pub.Catalog.Digest)
	}
}

// checkMirror follows docs/release.md, "Mirroring": every released artefact copied by digest to
// a private registry (crane copy) keeps its digest there.
func checkMirror(t *testing.T, pub *publication) {
	t.Helper()
	mirror := httptest.NewServer(quietRegistry())
	defer mirror.Close()
	host := strings.TrimPrefix(mirror.URL, "http://")
	refs := []string{pub.ProxyImage, pub.Bundle.Reference, pub.Chart.Reference, pub.Archives.Reference, pub.Catalog.Reference}
	for _, im := range pub.Images {
		refs = append(refs, im.Reference)
	}
	for _, src := range refs {
		ref, err := name.NewDigest(src)
		if err != nil {
			t.Fatal(err)
		}
		dst := host + "/mirror/" + ref.Context().RepositoryStr()[strings.LastIndex(ref.Context().RepositoryStr(), "/")+1:] + "@" + ref.DigestStr()
		if err := crane.Copy(src, dst); err != nil {
			t.Fatalf("crane copy %s %s: %v", src, dst, err)
		}
		got, err := crane.Digest(dst)
		if err != nil || got != ref.DigestStr() {
			t.Errorf("mirrored %s has digest %s (%v)", src, got, err)
		}
	}
}

// The archive writer is deterministic: the same files give the same bytes, and they read back.
func TestGzipTarIsReproducible(t *testing.T) {
	files := map[string][]byte{"nexoctl": []byte("binary"), "README.md": []byte("read me")}
	modes := map[string]int64{"nexoctl": 0o755, "README.md": 0o644}
	at := time.Unix(1764000000, 0).UTC()
	a, err := gzipTar([]string{"nexoctl", "README.md"}, files, modes, at)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := gzipTar([]string{"nexoctl", "README.md"}, files, modes, at)
	if !bytes.Equal(a, b) {
		t.Fatal("two archives of the same files differ")
	}
	gz, err := gzip.NewReader(bytes.NewReader(a))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	h, err := tr.Next()
	if err != nil || h.Name != "nexoctl" || h.Mode != 0o755 || !h.ModTime.Equal(at) {
		t.Fatalf("first entry %+v %v", h, err)
	}
}

// The catalog image of the tree is the one the newest release recorded (a published catalog is
// never rebuilt differently).
func TestCatalogImageIsTheRecordedOne(t *testing.T) {
	r, err := newestRelease("../..")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join("../..", releasesDir, r.Version, catalogRecord))
	if err != nil {
		t.Fatal(err)
	}
	var rec publishedImage
	if err := json.Unmarshal(raw, &rec); err != nil {
		t.Fatal(err)
	}
	idx, err := catalogImage("../../olm/catalog", r)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := idx.Digest(); d.String() != rec.Digest {
		t.Errorf("olm/catalog builds %s; releases/%s/%s records %s", d, r.Version, catalogRecord, rec.Digest)
	}
}
