// Package charts embeds the nexo-edge Helm chart so nexoctl installs exactly the chart of its
// own build.
package charts

import (
	"embed"
	"io/fs"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
)

//go:embed all:nexo-edge
var files embed.FS

// NexoEdge loads the embedded chart.
func NexoEdge() (*chart.Chart, error) {
	var buffered []*loader.BufferedFile
	err := fs.WalkDir(files, "nexo-edge", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := files.ReadFile(p)
		if err != nil {
			return err
		}
		rel := p[len("nexo-edge/"):]
		buffered = append(buffered, &loader.BufferedFile{Name: rel, Data: data})
		return nil
	})
	if err != nil {
		return nil, err
	}
	return loader.LoadFiles(buffered)
}
