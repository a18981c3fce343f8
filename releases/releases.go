// Package releases embeds what every released version installed (releases/<version>/crds), so
// a nexoctl of one version can judge an operator of another by that version's own support
// matrix: the nexo.io/support label each released CRD carries. The folders are written once by
// make release and never changed (README.md).
package releases

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"

	"sigs.k8s.io/yaml"

	"github.com/nexo-io/nexo-edge/catalog"
)

//go:embed */crds/*.yaml
var released embed.FS

// FS is the embedded releases: <version>/crds/*.yaml.
func FS() fs.FS { return released }

// SupportMatrix reads version → kind → support from fsys (laid out as FS), one entry per
// release folder; a CRD without the nexo.io/support label is an error, as is a folder with no
// CRD.
func SupportMatrix(fsys fs.FS) (map[string]map[string]catalog.Support, error) {
	files, err := fs.Glob(fsys, "*/crds/*.yaml")
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	out := map[string]map[string]catalog.Support{}
	for _, f := range files {
		raw, err := fs.ReadFile(fsys, f)
		if err != nil {
			return nil, err
		}
		var crd struct {
			Metadata struct {
				Labels map[string]string `json:"labels"`
			} `json:"metadata"`
			Spec struct {
				Names struct {
					Kind string `json:"kind"`
				} `json:"names"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal(raw, &crd); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		support := catalog.Support(crd.Metadata.Labels[catalog.SupportLabel])
		if crd.Spec.Names.Kind == "" || (support != catalog.Reconciled && support != catalog.SchemaOnly) {
			return nil, fmt.Errorf("%s: kind %q with %s=%q, want reconciled or schema-only", f, crd.Spec.Names.Kind, catalog.SupportLabel, support)
		}
		version := path.Dir(path.Dir(f))
		if out[version] == nil {
			out[version] = map[string]catalog.Support{}
		}
		out[version][crd.Spec.Names.Kind] = support
	}
	return out, nil
}
