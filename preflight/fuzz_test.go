package preflight

import (
	"context"
	"strings"
	"testing"

	"github.com/nexo-io/nexo-edge/contract/manifest"
)

// FuzzOffline runs the offline checks (support matrix, pipeline references, images) over
// arbitrary manifests: never a panic, and every check that does not pass says why.
func FuzzOffline(f *testing.F) {
	f.Add("apiVersion: nexo.io/v1alpha1\nkind: NexoPipeline\nmetadata: {name: p, namespace: shop}\nspec:\n  request:\n  - {kind: NexoQueryGuard, name: q}\n")
	f.Add("apiVersion: nexo.io/v1alpha1\nkind: NexoPipeline\nmetadata: {name: p}\nspec:\n  router: {kind: 7}\n  request: [null, {}, 3]\n")
	f.Add("apiVersion: apps/v1\nkind: Deployment\nspec:\n  template:\n    spec:\n      containers: [{image: 'x:latest'}, {image: 5}, 'c']\n")
	f.Add("apiVersion: nexo.io/v1alpha1\nkind: NexoDeploymentProfile\nspec: {images: {ingress: [1]}, stepCatalog: [{image: ''}, 9]}\n")
	f.Add("apiVersion: nexo.io/v1alpha1\nkind: NexoProxy\nspec: {proxyImage: 'r/p'}\n")
	f.Fuzz(func(t *testing.T, in string) {
		objs, err := manifest.Read(strings.NewReader(in), "fuzz")
		if err != nil || len(objs) == 0 {
			return
		}
		r := Run(context.Background(), &Env{Offline: true, Objects: objs}, OfflineCategories())
		for _, c := range r.Categories {
			for _, res := range c.Checks {
				if res.Status != OK && res.Message == "" {
					t.Fatalf("check %s is %s without a message", res.ID, res.Status)
				}
			}
		}
	})
}
