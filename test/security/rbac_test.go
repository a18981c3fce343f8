package security_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"github.com/nexo-io/nexo-edge/catalog"
	"github.com/nexo-io/nexo-edge/internal/testcluster"
)

// rule is one row of docs/rbac.md's rule table.
type rule struct {
	who, where, group string
	resources, names  []string
	verbs             []string
}

// docRules parses the rule table under the heading "## <section>" of docs/rbac.md (the rows
// whose first cell is operator or manager), expanding reconciled-kinds and all-kinds from the
// catalog.
func docRules(t *testing.T, section string) []rule {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(testcluster.RepoRoot(), "docs", "rbac.md"))
	if err != nil {
		t.Fatal(err)
	}
	list := func(cell string) []string {
		var out []string
		for _, f := range strings.Split(cell, ",") {
			if f = strings.TrimSpace(strings.Trim(strings.TrimSpace(f), "`")); f != "" {
				out = append(out, f)
			}
		}
		return out
	}
	var rules []rule
	in := false
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, "## ") {
			in = line == "## "+section
		}
		if !in {
			continue
		}
		cells := strings.Split(line, "|")
		if len(cells) < 8 {
			continue
		}
		who := strings.TrimSpace(cells[1])
		if who != "operator" && who != "manager" {
			continue
		}
		r := rule{who: who, where: strings.TrimSpace(cells[2]), group: strings.TrimSpace(cells[3]),
			names: list(cells[5]), verbs: list(cells[6])}
		if r.group == "core" {
			r.group = ""
		}
		for _, res := range list(cells[4]) {
			switch res {
			case "reconciled-kinds", "reconciled-kinds/status", "all-kinds":
				for _, k := range catalog.Kinds {
					if res == "all-kinds" || k.Support == catalog.Reconciled {
						r.resources = append(r.resources, k.Plural+strings.TrimPrefix(res, strings.Split(res, "/")[0]))
					}
				}
			default:
				r.resources = append(r.resources, res)
			}
		}
		rules = append(rules, r)
	}
	if len(rules) < 10 {
		t.Fatalf("docs/rbac.md, section %q: found only %d rule rows", section, len(rules))
	}
	return rules
}

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
	case "copies":
		if len(in.watched) > 0 {
			return slices.Contains(in.watched, ns)
		}
		return slices.Contains(in.copies, ns)
	}
	panic("unknown where " + where)
}

// expected is what docs/rbac.md says who may do.
func expected(rules []rule, in install, who string, gr schema.GroupResource, verb, ns, name string) bool {
	for _, r := range rules {
		if r.who != who || r.group != gr.Group || !slices.Contains(r.resources, gr.Resource) || !slices.Contains(r.verbs, verb) || !in.covers(r.where, ns) {
			continue
		}
		if len(r.names) > 0 && !slices.Contains(r.names, name) {
			continue
		}
		return true
	}
	return false
}

type probe struct {
	gr              schema.GroupResource
	namespaced      bool
	verb, ns, name  string
	allowed, wanted bool
}

// servedResources lists every resource (and the nexo.io status subresources) the API server
// serves, with whether it is namespaced.
func servedResources(t *testing.T, cs kubernetes.Interface) map[schema.GroupResource]bool {
	t.Helper()
	lists, err := cs.Discovery().ServerPreferredResources()
	if err != nil {
		t.Fatal(err)
	}
	out := map[schema.GroupResource]bool{}
	for _, l := range lists {
		gv, _ := schema.ParseGroupVersion(l.GroupVersion)
		for _, r := range l.APIResources {
			out[schema.GroupResource{Group: gv.Group, Resource: r.Name}] = r.Namespaced
		}
	}
	for _, k := range catalog.Kinds {
		out[schema.GroupResource{Group: catalog.Group, Resource: k.Plural + "/status"}] = true
	}
	return out
}

// checkMatrix asks the API server, for every served resource, verb, namespace and probed name,
// whether the ServiceAccount may, and compares with docs/rbac.md.
//
// What every ServiceAccount may do anyway (discovery, self-reviews: the API server's defaults for
// authenticated users) is not the product's grant: it is measured with a ServiceAccount name the
// chart never binds and left out.
func checkMatrix(t *testing.T, cs kubernetes.Interface, rules []rule, in install, who string, resources map[schema.GroupResource]bool) {
	t.Helper()
	user := fmt.Sprintf("system:serviceaccount:%s:nexo-%s", in.release, who)
	nobody := fmt.Sprintf("system:serviceaccount:%s:nobody-at-all", in.release)
	names := []string{""}
	for _, r := range rules {
		for _, n := range r.names {
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	namespaces := []string{in.release, "shop", "elsewhere", ""}
	var probes []*probe
	for gr, namespaced := range resources {
		for _, verb := range []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"} {
			for _, ns := range namespaces {
				if !namespaced && ns != "" {
					continue
				}
				for _, name := range names {
					if name != "" && gr.Resource != "configmaps" && gr.Resource != "leases" && gr.Resource != "secrets" {
						continue
					}
					probes = append(probes, &probe{gr: gr, namespaced: namespaced, verb: verb, ns: ns, name: name,
						wanted: expected(rules, in, who, gr, verb, ns, name)})
				}
			}
		}
	}
	ctx := context.Background()
	work := make(chan *probe)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []string
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range work {
				res, sub, _ := strings.Cut(p.gr.Resource, "/")
				ask := func(u string) (bool, error) {
					sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
						User: u, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + in.release, "system:authenticated"},
						ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: p.ns, Verb: p.verb, Group: p.gr.Group, Resource: res, Subresource: sub, Name: p.name},
					}}
					got, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
					if err != nil {
						return false, err
					}
					return got.Status.Allowed, nil
				}
				allowed, err := ask(user)
				baseline, err2 := ask(nobody)
				mu.Lock()
				switch {
				case err != nil || err2 != nil:
					failures = append(failures, fmt.Sprint(err, err2))
				case baseline && !p.wanted:
					// everyone's default, not a product grant
				case allowed != p.wanted:
					what := map[bool]string{true: "granted but not in docs/rbac.md", false: "in docs/rbac.md but not granted"}[allowed]
					failures = append(failures, fmt.Sprintf("%s: %s %s/%s in namespace %q name %q: %s", who, p.verb, p.gr.Group, p.gr.Resource, p.ns, p.name, what))
				}
				mu.Unlock()
			}
		}()
	}
	for _, p := range probes {
		work <- p
	}
	close(work)
	wg.Wait()
	sort.Strings(failures)
	for _, f := range failures {
		t.Error(f)
	}
	t.Logf("%s (release %s, watched %v): %d SubjectAccessReviews, %d differences from docs/rbac.md", who, in.release, in.watched, len(probes), len(failures))
}
