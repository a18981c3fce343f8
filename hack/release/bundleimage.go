package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"sigs.k8s.io/yaml"
)

// bundleImageName is the repository of the registry+v1 bundle image under the registry.
const bundleImageName = "nexo-operator-bundle"

// bundleImage is the registry+v1 bundle image of the bundle folder dir, in the shape
// bundle.Dockerfile describes: FROM scratch, the folders manifests/, metadata/ and
// tests/scorecard/ at the root, and the labels of metadata/annotations.yaml (which is how OLM and
// opm read a bundle's package and channels). This builder, not the Dockerfile, makes the
// released image: every file owned by root, mode 0644 (folders 0755), at the commit's time, in
// name order, so one commit gives one digest.
func bundleImage(dir string, s source) (v1.Image, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "metadata", "annotations.yaml"))
	if err != nil {
		return nil, err
	}
	var meta struct {
		Annotations map[string]string `json:"annotations"`
	}
	if err := yaml.UnmarshalStrict(raw, &meta); err != nil || meta.Annotations["operators.operatorframework.io.bundle.mediatype.v1"] != "registry+v1" {
		return nil, fmt.Errorf("%s/metadata/annotations.yaml is not a registry+v1 bundle's (%v)", dir, err)
	}
	layer, err := treeLayer(dir, []string{"manifests", "metadata", "tests"}, s.Time)
	if err != nil {
		return nil, err
	}
	lbl := labels(binary{Image: bundleImageName}, s)
	for k, v := range meta.Annotations {
		lbl[k] = v
	}
	return ociImage(layer, v1.Platform{OS: "linux", Architecture: "amd64"}, v1.Config{Labels: lbl},
		"hack/release: the bundle folder (manifests/, metadata/, tests/)", s.Time)
}

// treeLayer is a layer with the folders tops of dir (in that order, each walked in name order).
func treeLayer(dir string, tops []string, at time.Time) (v1.Layer, error) {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, top := range tops {
		err := filepath.WalkDir(filepath.Join(dir, top), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(dir, p)
			if err != nil {
				return err
			}
			hdr := &tar.Header{Name: filepath.ToSlash(rel), ModTime: at, Format: tar.FormatPAX}
			if d.IsDir() {
				hdr.Name += "/"
				hdr.Typeflag, hdr.Mode = tar.TypeDir, 0o755
				return tw.WriteHeader(hdr)
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			hdr.Typeflag, hdr.Mode, hdr.Size = tar.TypeReg, 0o644, int64(len(data))
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
			_, err = tw.Write(data)
			return err
		})
		if err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	raw := b.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(raw)), nil },
		tarball.WithMediaType(types.OCILayer))
}
