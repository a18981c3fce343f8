// Package crd embeds the generated CRDs of config/crd/bases, so binaries (the operator's
// signature checks, nexoctl, the Manager) use exactly the schemas this build ships.
package crd

import (
	"embed"
	"fmt"
	"io/fs"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

//go:embed bases/*.yaml
var bases embed.FS

var loadOnce = sync.OnceValues(func() (map[string]*apiextensionsv1.CustomResourceDefinition, error) {
	files, err := fs.Glob(bases, "bases/*.yaml")
	if err != nil {
		return nil, err
	}
	out := make(map[string]*apiextensionsv1.CustomResourceDefinition, len(files))
	for _, f := range files {
		raw, err := bases.ReadFile(f)
		if err != nil {
			return nil, err
		}
		c := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(raw, c); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		out[c.Spec.Names.Kind] = c
	}
	return out, nil
})

// ByKind returns the embedded CRDs keyed by kind. Callers must not modify them.
func ByKind() (map[string]*apiextensionsv1.CustomResourceDefinition, error) { return loadOnce() }
