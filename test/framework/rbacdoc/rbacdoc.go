// Package rbacdoc is test tooling: it reads the rule tables of docs/rbac.md and asks a real API
// server, with SubjectAccessReview, whether a ServiceAccount's effective permissions are exactly
// those rows: a grant missing from the table, or a row the cluster does not grant, is a
// difference. The chart tests (test/security) and the OLM tests (test/olm) share it.
package rbacdoc

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"github.com/nexo-io/nexo-edge/catalog"
	"github.com/nexo-io/nexo-edge/test/framework/testcluster"
)

// Rule is one row of a docs/rbac.md rule table.
type Rule struct {
	Who, Where, Group string
	Resources, Names  []string
	Verbs             []string
}

// Rules parses the rule table under the heading "## <section>" of docs/rbac.md (the rows whose
// first cell is operator or manager), expanding reconciled-kinds and all-kinds from the catalog.
func Rules(section string) ([]Rule, error) {
	raw, err := os.ReadFile(filepath.Join(testcluster.RepoRoot(), "docs", "rbac.md"))
	if err != nil {
		return nil, err
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
	var rules []Rule
	in := false
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(line, "## ") {
			in = line == "## "+section
		}
		cells := strings.Split(line, "|")
		if !in || len(cells) < 8 {
			continue
		}
		who := strings.TrimSpace(cells[1])
		if who != "operator" && who != "manager" {
			continue
		}
		r := Rule{Who: who, Where: strings.TrimSpace(cells[2]), Group: strings.TrimSpace(cells[3]), Names: list(cells[5]), Verbs: list(cells[6])}
		if r.Group == "core" {
			r.Group = ""
		}
		for _, res := range list(cells[4]) {
			switch res {
			case "reconciled-kinds", "reconciled-kinds/status", "all-kinds":
				for _, k := range catalog.Kinds {
					if res == "all-kinds" || k.Support == catalog.Reconciled {
						r.Resources = append(r.Resources, k.Plural+strings.TrimPrefix(res, strings.Split(res, "/")[0]))
					}
				}
			default:
				r.Resources = append(r.Resources, res)
			}
		}
		rules = append(rules, r)
	}
	if len(rules) < 10 {
		return nil, fmt.Errorf("docs/rbac.md, section %q: found only %d rule rows", section, len(rules))
	}
	return rules, nil
}

// Covers reports whether a rule granted at "where" (a table's second column) applies in
// namespace ns ("" = cluster scope, or all namespaces).
type Covers func(where, ns string) bool

// Expected is what the rules say who may do.
func Expected(rules []Rule, covers Covers, who string, gr schema.GroupResource, verb, ns, name string) bool {
	for _, r := range rules {
		if r.Who != who || r.Group != gr.Group || !slices.Contains(r.Resources, gr.Resource) || !slices.Contains(r.Verbs, verb) || !covers(r.Where, ns) {
			continue
		}
		if len(r.Names) > 0 && !slices.Contains(r.Names, name) {
			continue
		}
		return true
	}
	return false
}

// ServedResources lists every resource (and the nexo.io status subresources) the API server
// serves, with whether it is namespaced.
func ServedResources(cs kubernetes.Interface) (map[schema.GroupResource]bool, error) {
	lists, err := cs.Discovery().ServerPreferredResources()
	if err != nil {
		return nil, err
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
	return out, nil
}

// Subject is the ServiceAccount whose permissions are checked.
type Subject struct {
	Who       string // operator or manager: the rows of the table
	Namespace string // the ServiceAccount's namespace
	Name      string // the ServiceAccount's name
}

// Check asks the API server, for every served resource, verb, namespace (of namespaces, plus
// cluster scope) and probed name, whether the subject may, and returns every difference from the
// rules, and how many SubjectAccessReviews it made.
//
// What every ServiceAccount may do anyway (discovery, self-reviews: the API server's defaults for
// authenticated users) is not the product's grant: it is measured with a ServiceAccount name no
// install binds, and left out.
func Check(ctx context.Context, cs kubernetes.Interface, rules []Rule, covers Covers, s Subject, resources map[schema.GroupResource]bool, namespaces []string) ([]string, int) {
	user := fmt.Sprintf("system:serviceaccount:%s:%s", s.Namespace, s.Name)
	nobody := fmt.Sprintf("system:serviceaccount:%s:nobody-at-all", s.Namespace)
	names := []string{""}
	for _, r := range rules {
		for _, n := range r.Names {
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	type probe struct {
		gr             schema.GroupResource
		verb, ns, name string
		wanted         bool
	}
	var probes []probe
	for gr, namespaced := range resources {
		for _, verb := range []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"} {
			for _, ns := range append(slices.Clone(namespaces), "") {
				if !namespaced && ns != "" {
					continue
				}
				for _, name := range names {
					if name != "" && gr.Resource != "configmaps" && gr.Resource != "leases" && gr.Resource != "secrets" &&
						gr.Resource != "validatingadmissionpolicies" && gr.Resource != "validatingadmissionpolicybindings" {
						continue
					}
					probes = append(probes, probe{gr: gr, verb: verb, ns: ns, name: name, wanted: Expected(rules, covers, s.Who, gr, verb, ns, name)})
				}
			}
		}
	}
	work := make(chan probe)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []string
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range work {
				res, sub, _ := strings.Cut(p.gr.Resource, "/")
				ask := func(u string) (bool, error) {
					sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
						User: u, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + s.Namespace, "system:authenticated"},
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
					failures = append(failures, fmt.Sprintf("%s: %s %s/%s in namespace %q name %q: %s", s.Who, p.verb, p.gr.Group, p.gr.Resource, p.ns, p.name, what))
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
	return failures, len(probes)
}
