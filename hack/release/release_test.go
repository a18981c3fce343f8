package main

import (
	"archive/tar"
	"bytes"
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
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/nexo-io/nexo-edge/contract/buildinfo"
)

func quietRegistry() http.Handler {
	return registry.New(registry.WithReferrersSupport(true), registry.Logger(log.New(io.Discard, "", 0)))
}

// make release, against go-containerregistry's registry on loopback: every artefact is pushed
// and pulls back by the digest recorded; releases/<version>/ names only those digests, in the
// CSV (containerImage, both Deployments, relatedImages), the chart (image.digest, rendered as
// @sha256), the kustomize entry point (images:) and the catalog (olm.bundle by digest); the
// bundle image carries the stamped bundle and its labels; the operator binary pulled from the
// released image prints the version and commit; release.json records the toolchain and where
// it pushed; the nexoctl archives, the chart (pulled by Helm's own registry client) and the
// catalog image pull back by digest and hold what the tree holds; a mirror by digest keeps every
// digest (docs/release.md, "Mirroring"). A second release of the version is refused.
func TestReleaseToARegistry(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and pushes every image")
	}
	reg := httptest.NewServer(quietRegistry())
	defer reg.Close()
	registryPath := strings.TrimPrefix(reg.URL, "http://") + "/nexo"
	repo := cleanCheckout(t)
	proxy := publishProxyImage(t, registryPath)
	pub, err := releaseVersion(repo, t.TempDir(), registryPath, buildinfo.Version, "")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(repo, releasesDir, buildinfo.Version)
	if pub.Bundle == nil || len(pub.Images) != len(binaries) {
		t.Fatalf("published %+v", pub)
	}
	// Every artefact pulls back by the digest recorded in release.json.
	recorded, err := os.ReadFile(filepath.Join(dir, "release.json"))
	if err != nil {
		t.Fatal(err)
	}
	if pub.ProxyImage != proxy || !strings.Contains(string(recorded), proxy) {
		t.Errorf("release.json records the proxy image %q, want %s", pub.ProxyImage, proxy)
	}
	d := digests{proxyImageName: proxy}
	for _, im := range append(pub.Images, *pub.Bundle) {
		if !strings.Contains(string(recorded), im.Reference) {
			t.Errorf("release.json does not list %s", im.Reference)
		}
		ref, err := name.NewDigest(im.Reference)
		if err != nil {
			t.Fatal(err)
		}
		desc, err := remote.Get(ref)
		if err != nil || desc.Digest.String() != im.Digest {
			t.Fatalf("pull %s: %v %v", im.Reference, desc, err)
		}
		d[im.Name] = im.Reference
	}
	// The CSV names every image by the published digest.
	csv := &operatorsv1alpha1.ClusterServiceVersion{}
	readYAML(t, filepath.Join(dir, "bundle/manifests/nexo-operator.clusterserviceversion.yaml"), csv)
	if csv.Annotations["containerImage"] != d["nexo-operator"] || csv.Annotations["features.operators.openshift.io/disconnected"] != "false" {
		t.Errorf("CSV annotations: containerImage %q disconnected %q", csv.Annotations["containerImage"], csv.Annotations["features.operators.openshift.io/disconnected"])
	}
	for _, dep := range csv.Spec.InstallStrategy.StrategySpec.DeploymentSpecs {
		if img := dep.Spec.Template.Spec.Containers[0].Image; img != d[dep.Name] {
			t.Errorf("CSV Deployment %s runs %s, want %s", dep.Name, img, d[dep.Name])
		}
	}
	for _, ri := range csv.Spec.RelatedImages {
		if ri.Image != d[ri.Name] {
			t.Errorf("relatedImages %s = %s, want %s", ri.Name, ri.Image, d[ri.Name])
		}
	}
	// The chart renders both Deployments by digest.
	for _, img := range renderedImages(t, chartManifest(t, filepath.Join(dir, "chart/nexo-edge"))) {
		if img != d["nexo-operator"] && img != d["nexo-manager"] {
			t.Errorf("the released chart renders image %s", img)
		}
	}
	// kustomize build of the release renders both Deployments by digest.
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatal(err)
	}
	built, err := res.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	if imgs := renderedImages(t, string(built)); len(imgs) != 2 || imgs[0] != d["nexo-operator"] && imgs[0] != d["nexo-manager"] || imgs[1] != d["nexo-operator"] && imgs[1] != d["nexo-manager"] {
		t.Errorf("kustomize build renders images %v", imgs)
	}
	// The catalog holds the version, its bundle image by digest.
	cat, err := os.ReadFile(filepath.Join(repo, "olm/catalog/nexo-operator/catalog.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(cat), "image: "+pub.Bundle.Reference) {
		t.Errorf("the catalog does not name the bundle %s", pub.Bundle.Reference)
	}
	// The bundle image: the labels OLM reads, and the stamped CSV inside.
	bref, _ := name.NewDigest(pub.Bundle.Reference)
	bimg, err := remote.Image(bref)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := bimg.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Config.Labels["operators.operatorframework.io.bundle.package.v1"] != "nexo-operator" || cfg.Config.Labels["operators.operatorframework.io.bundle.mediatype.v1"] != "registry+v1" {
		t.Errorf("bundle labels %v", cfg.Config.Labels)
	}
	var inImage bytes.Buffer
	extractTo(t, mutate.Extract(bimg), "manifests/nexo-operator.clusterserviceversion.yaml", &inImage)
	stamped, _ := os.ReadFile(filepath.Join(dir, "bundle/manifests/nexo-operator.clusterserviceversion.yaml"))
	if !bytes.Equal(inImage.Bytes(), stamped) {
		t.Error("the bundle image's CSV is not releases/<version>/bundle's")
	}
	// The released operator image runs and names its version and commit.
	oref, _ := name.NewDigest(d["nexo-operator"])
	idx, err := remote.Index(oref)
	if err != nil {
		t.Fatal(err)
	}
	im, _ := idx.IndexManifest()
	for _, m := range im.Manifests {
		if m.Platform.Architecture != runtime.GOARCH {
			continue
		}
		img, err := idx.Image(m.Digest)
		if err != nil {
			t.Fatal(err)
		}
		exe := filepath.Join(t.TempDir(), "nexo-operator")
		extractFile(t, mutate.Extract(img), "nexo-operator", exe)
		out, err := exec.Command(exe, "--version").CombinedOutput()
		if err != nil || !strings.Contains(string(out), buildinfo.Version+"+") || !strings.HasSuffix(strings.TrimSpace(string(out)), pub.Commit[:12]) {
			t.Errorf("released operator --version: %q %v", out, err)
		}
	}
	checkReleaseRecord(t, dir, pub, csv)
	checkArchives(t, repo, dir, pub)
	checkChart(t, pub, d)
	checkCatalog(t, repo, dir, pub)
	checkMirror(t, pub)
	// A version is released once.
	if _, err := releaseVersion(repo, t.TempDir(), registryPath, buildinfo.Version, ""); err == nil || !strings.Contains(err.Error(), "is released, and a release is never replaced") {
		t.Errorf("second release: %v", err)
	}
}

// A registry that refuses the bundle image after taking the product images: the release fails
// with the registry's reason and writes nothing, neither releases/<version>/ nor the catalog.
func TestReleaseRefusedWritesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and pushes every image")
	}
	inner := quietRegistry()
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/"+bundleImageName+"/manifests/") {
			http.Error(w, `{"errors":[{"code":"DENIED","message":"bundle push refused by policy"}]}`, http.StatusForbidden)
			return
		}
		inner.ServeHTTP(w, r)
	}))
	defer refusing.Close()
	repo := cleanCheckout(t)
	publishProxyImage(t, strings.TrimPrefix(refusing.URL, "http://")+"/nexo")
	pub, err := releaseVersion(repo, t.TempDir(), strings.TrimPrefix(refusing.URL, "http://")+"/nexo", buildinfo.Version, "")
	if err == nil || pub != nil || !strings.Contains(err.Error(), "nothing was recorded as released") || !strings.Contains(err.Error(), "DENIED") {
		t.Fatalf("refused bundle: %v %+v", err, pub)
	}
	if _, err := os.Stat(filepath.Join(repo, releasesDir, buildinfo.Version)); !os.IsNotExist(err) {
		t.Errorf("releases/%s exists after a refused push (%v)", buildinfo.Version, err)
	}
	out, err := exec.Command("git", "-C", repo, "status", "--porcelain").CombinedOutput()
	if err != nil || len(out) != 0 {
		t.Errorf("the tree changed after a refused release: %s %v", out, err)
	}
}

// publishProxyImage pushes a stand-in for the proxy team's image, registry/nexo-proxy:<version>,
// and returns it by digest.
func publishProxyImage(t *testing.T, registry string) string {
	t.Helper()
	img, err := random.Image(512, 1)
	if err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag(registry + "/" + proxyImageName + ":" + buildinfo.Version)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tag, img); err != nil {
		t.Fatal(err)
	}
	digest, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return tag.Context().Digest(digest.String()).String()
}

// Without the proxy image in the registry the release is refused before anything is pushed,
// naming the image: the bundle could not name it by digest.
func TestReleaseNeedsTheProxyImage(t *testing.T) {
	reg := httptest.NewServer(quietRegistry())
	defer reg.Close()
	registryPath := strings.TrimPrefix(reg.URL, "http://") + "/nexo"
	_, err := releaseVersion(t.TempDir(), t.TempDir(), registryPath, buildinfo.Version, "")
	if err == nil || !strings.Contains(err.Error(), registryPath+"/nexo-proxy:"+buildinfo.Version+" is not published") || !strings.Contains(err.Error(), "nothing was pushed") {
		t.Fatalf("release without the proxy image: %v", err)
	}
	resp, err := http.Get(reg.URL + "/v2/_catalog")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body := new(strings.Builder)
	_, _ = io.Copy(body, resp.Body)
	if strings.Contains(body.String(), "nexo-operator") || strings.Contains(body.String(), "nexo-manager") {
		t.Errorf("the registry holds %s after a refused release", body)
	}
}

func readYAML(t *testing.T, path string, into any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, into); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

// chartManifest renders a chart folder client-side on a 1.30 cluster.
func chartManifest(t *testing.T, dir string) string {
	t.Helper()
	ch, err := loader.LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	inst := action.NewInstall(&action.Configuration{})
	inst.ReleaseName, inst.Namespace, inst.DryRun, inst.ClientOnly = "nexo-edge", "nexo-system", true, true
	inst.KubeVersion = &chartutil.KubeVersion{Version: "v1.30.0", Major: "1", Minor: "30"}
	rel, err := inst.Run(ch, map[string]any{"manager": map[string]any{"controlPlaneURL": "https://cp.example"}})
	if err != nil {
		t.Fatal(err)
	}
	return rel.Manifest
}

// renderedImages are the container images of the Deployments in a multi-document manifest.
func renderedImages(t *testing.T, manifest string) []string {
	t.Helper()
	var out []string
	for _, doc := range strings.Split(manifest, "\n---") {
		var dep appsv1.Deployment
		if err := yaml.Unmarshal([]byte(doc), &dep); err != nil || dep.Kind != "Deployment" {
			continue
		}
		for _, c := range dep.Spec.Template.Spec.Containers {
			out = append(out, c.Image)
		}
	}
	if len(out) == 0 {
		t.Fatal("no Deployment rendered")
	}
	return out
}

func extractTo(t *testing.T, rc io.ReadCloser, name string, w io.Writer) {
	t.Helper()
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("%s not in the image: %v", name, err)
		}
		if h.Name == name {
			if _, err := io.Copy(w, tr); err != nil {
				t.Fatal(err)
			}
			return
		}
	}
}
