package controllers

import (
	"strings"
	"testing"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/catalog"
	"github.com/nexo-io/nexo-edge/controllers/render"
)

func TestPortConflict(t *testing.T) {
	for _, c := range []struct {
		name          string
		proxy, metric int32
		metrics, step bool
		want          string // the port the refusal names; "" for none
	}{
		{"no NexoMetrics", 9216, 0, false, false, ""},
		{"default proxy port", 0, 9216, true, false, ""},
		{"other ports", 27019, 9216, true, true, ""},
		{"same port", 9216, 9216, true, false, "9216"},
		{"egress admin port", 27018, 9216, true, false, "27018"},
		{"metrics on a step container's port", 27017, 27100, true, true, "27100"},
		{"no step container, no clash", 27017, 27100, true, false, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := &render.Graph{
				Proxy:   &nexov1alpha1.NexoProxy{Spec: nexov1alpha1.NexoProxySpec{Port: c.proxy}},
				Profile: &nexov1alpha1.NexoDeploymentProfile{},
			}
			if c.metrics {
				g.Metrics = &nexov1alpha1.NexoMetricsSpec{Port: c.metric}
			}
			if c.step {
				g.Steps = []render.Component{{Kind: "NexoRateLimit", Name: "r", Slot: catalog.SlotRequest}}
				g.Profile.Spec.StepCatalog = []nexov1alpha1.StepImage{{Kind: "NexoRateLimit", Image: "r/rl:1"}}
			}
			b := portConflict(g)
			if (b != nil) != (c.want != "") {
				t.Fatalf("portConflict = %+v, want a conflict on %q", b, c.want)
			}
			if b != nil && (b.reason != nexov1alpha1.ReasonPortConflict || b.wait || !strings.Contains(b.message, c.want) || !strings.Contains(b.message, "docs/runtime.md")) {
				t.Errorf("refusal %+v: want PortConflict, not waiting, naming port %s and where the pod's ports are written", b, c.want)
			}
		})
	}
}
