package statuscmd

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/nexo-io/nexo-edge/nexoctl/cliopts"
)

func TestWatchPrintsOnlyChanges(t *testing.T) {
	out := &bytes.Buffer{}
	o := cliopts.New(nil, out, out)
	a := Proxy{Namespace: "shop", Name: "a", Phase: "Ready", ReadyReplicas: 2, Replicas: 2, GraphRevision: "r1"}
	b := Proxy{Namespace: "shop", Name: "b", Phase: "Progressing", ReadyReplicas: 0, Replicas: 1, GraphRevision: "r1"}
	var seen map[string]Proxy
	step := func(ps ...Proxy) string {
		t.Helper()
		out.Reset()
		if err := printChanges(o, Status{Proxies: ps, Scope: "namespace shop"}, "", &seen); err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	if first := step(a, b); !strings.Contains(first, "NAMESPACE") || !strings.Contains(first, "Progressing") {
		t.Fatalf("first print is not the table:\n%s", first)
	}
	if same := step(a, b); same != "" {
		t.Errorf("nothing changed but printed:\n%s", same)
	}
	b.Phase, b.ReadyReplicas = "Ready", 1
	if changed := step(a, b); strings.Count(changed, "\n") != 1 || !regexp.MustCompile(`(?m)^shop\s+b\s+Ready\s+1/1\s`).MatchString(changed) || strings.Contains(changed, "NAMESPACE") {
		t.Errorf("one change, want one line for b:\n%s", changed)
	}
	if gone := step(b); strings.Count(gone, "\n") != 1 || !strings.Contains(gone, "Deleted") {
		t.Errorf("a went away, want one Deleted line:\n%s", gone)
	}
}
