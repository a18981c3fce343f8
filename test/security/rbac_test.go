package security_test

import (
	"context"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"github.com/nexo-io/nexo-edge/test/framework/rbacdoc"
)

// install describes one chart installation the matrix is checked against.
type install struct {
	release string   // release namespace
	watched []string // empty: all namespaces
	copies  []string // operator.secretCopyNamespaces (all-namespaces mode)
}

// covers reports whether a rule granted "where" applies in namespace ns ("" = cluster scope or
// all namespaces).
func (in install) covers(where, ns string) bool {
	switch where {
	case "cluster":
		return true
	case "release":
		return ns == in.release
	case "watched":
		return len(in.watched) == 0 || slices.Contains(in.watched, ns)
	case "deploy":
		// testinstall.Values' deploy limit: the watched namespaces, or "*" when all are watched.
		return len(in.watched) == 0 || slices.Contains(in.watched, ns)
	case "copies":
		if len(in.watched) > 0 {
			return slices.Contains(in.watched, ns)
		}
		return slices.Contains(in.copies, ns)
	}
	panic("unknown where " + where)
}

// checkMatrix compares what the install's ServiceAccount "nexo-<who>" may do with docs/rbac.md's
// chart table, in the release namespace, shop, elsewhere and at cluster scope.
func checkMatrix(t *testing.T, cs kubernetes.Interface, rules []rbacdoc.Rule, in install, who string, resources map[schema.GroupResource]bool) {
	t.Helper()
	failures, n := rbacdoc.Check(context.Background(), cs, rules, in.covers, rbacdoc.Subject{Who: who, Namespace: in.release, Name: "nexo-" + who},
		resources, []string{in.release, "shop", "elsewhere"})
	for _, f := range failures {
		t.Error(f)
	}
	t.Logf("%s (release %s, watched %v): %d SubjectAccessReviews, %d differences from docs/rbac.md", who, in.release, in.watched, n, len(failures))
}
