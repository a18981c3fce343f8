package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The Manager is a small agent with its own RBAC: it must not carry the operator's
// controllers, preflight or the terminal styling of nexoctl. It gets its scheme from package
// scheme, the CRD fingerprint from package fingerprint and wire names from wire. It does carry
// the renderers (controllers/render, pure functions), through package preview: a preview
// renders every proxy with the operator's own code, not a copy (docs/protocol.md, "Previews").
func TestManagerLinksNoOperatorCode(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	forbidden := []string{
		"github.com/nexo-io/nexo-edge/controllers",
		"github.com/nexo-io/nexo-edge/preflight",
		"github.com/nexo-io/nexo-edge/operator",
		"github.com/nexo-io/nexo-edge/nexoctl",
		"charm.land/lipgloss",
		// controller-runtime's metrics filters bring in k8s.io/apiserver's authenticators: 36 MB of
		// binary and about 20 MiB of memory. manager.MetricsAuth does the same reviews on client-go.
		"sigs.k8s.io/controller-runtime/pkg/metrics/filters",
	}
	const renderers = "github.com/nexo-io/nexo-edge/controllers/render"
	for _, dep := range strings.Fields(string(out)) {
		if dep == renderers {
			continue
		}
		for _, f := range forbidden {
			if dep == f || strings.HasPrefix(dep, f+"/") {
				t.Errorf("cmd/manager links %s", dep)
			}
		}
	}
}
