package controllers

import (
	"strings"
	"testing"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
)

func TestPortConflict(t *testing.T) {
	for _, c := range []struct {
		name          string
		proxy, metric int32
		metrics       bool
		want          bool
	}{
		{"no NexoMetrics", 9216, 0, false, false},
		{"default proxy port", 0, 9216, true, false},
		{"other ports", 27018, 9216, true, false},
		{"same port", 9216, 9216, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := &nexov1alpha1.NexoProxy{Spec: nexov1alpha1.NexoProxySpec{Port: c.proxy}}
			var m *nexov1alpha1.NexoMetricsSpec
			if c.metrics {
				m = &nexov1alpha1.NexoMetricsSpec{Port: c.metric}
			}
			b := portConflict(p, m)
			if (b != nil) != c.want {
				t.Fatalf("portConflict = %+v, want conflict %v", b, c.want)
			}
			if b != nil && (b.reason != nexov1alpha1.ReasonPortConflict || b.wait || !strings.Contains(b.message, "9216")) {
				t.Errorf("refusal %+v: want PortConflict, not waiting, naming the port", b)
			}
		})
	}
}
