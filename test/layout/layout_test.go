// Package layout checks the floor plan of the repository (docs/development.md, "The floor
// plan"): every package belongs to a tree, and a tree imports only the trees below it.
package layout

import (
	"encoding/json"
	"io"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/nexo-io/nexo-edge"

// below names, for each tree, the trees its code may import. Tests of a package may import
// more (a Manager test runs a real Control Plane), product code may not. Keep this table and
// the diagram in docs/development.md together.
var below = map[string][]string{
	// The kinds: the catalog, the Go types, the CRDs and admission policies generated from them.
	"catalog": {},
	"api":     {"catalog"},
	"config":  {"catalog", "api"},
	"charts":  {},
	// What was released: each version's CRDs, embedded (its support matrix).
	"releases": {"catalog"},
	// What the processes agree on: wire names, protocol, tokens, signatures, licenses, the scheme.
	"contract": {"catalog", "api", "config"},
	// Libraries of one binary each. The renderer (pure functions, and the table of a proxy's
	// children) is below the controllers, so nexoctl status reads the same table.
	"controllers/render": {"catalog", "api", "config", "contract"},
	"controllers":        {"catalog", "api", "config", "contract", "controllers/render"},
	"preflight":          {"catalog", "api", "config", "contract", "controllers/render", "releases"},
	// What a deploy would do (a server-side dry run and the operator's rendering): the Manager
	// answers previews with it, nexoctl diff runs it from a terminal.
	"preview": {"catalog", "api", "config", "contract", "controllers/render"},
	// The binaries' trees.
	"operator": {"catalog", "api", "config", "contract", "controllers", "controllers/render"},
	"manager":  {"catalog", "api", "config", "contract", "preview"},
	// The reference Control Plane in layers: decisions, storage, authorization, then the HTTP
	// handlers and the command line (controlplane, controlplane/cli).
	"controlplane/targeting": {"catalog", "api", "config", "contract"},
	"controlplane/storage":   {"catalog", "api", "config", "contract", "controlplane/targeting"},
	"controlplane/authz":     {"catalog", "api", "config", "contract", "controlplane/targeting", "controlplane/storage"},
	"controlplane":           {"catalog", "api", "config", "contract", "controlplane/targeting", "controlplane/storage", "controlplane/authz"},
	"nexoctl":                {"catalog", "api", "config", "charts", "contract", "controllers/render", "preflight", "releases", "preview"},
	// Thin mains: each its own tree and what that tree may import.
	"cmd/operator":     {"operator", "catalog", "api", "config", "contract", "controllers", "controllers/render"},
	"cmd/manager":      {"manager", "catalog", "api", "config", "contract", "preview"},
	"cmd/controlplane": {"controlplane", "catalog", "api", "config", "contract"},
	"cmd/nexoctl":      {"nexoctl", "catalog", "api", "config", "charts", "contract", "controllers/render", "preflight", "releases", "preview"},
	// Test tooling: the product, never a test suite or hack/.
	"test/framework": {"catalog", "api", "config", "charts", "contract", "controllers/render", "controllers", "preflight", "releases", "preview",
		"operator", "manager", "controlplane", "controlplane/targeting", "controlplane/storage", "controlplane/authz", "nexoctl"},
	// Development tools: anything but the test suites.
	"hack": {"catalog", "api", "config", "charts", "contract", "controllers/render", "controllers", "preflight", "releases", "preview",
		"operator", "manager", "controlplane", "controlplane/targeting", "controlplane/storage", "controlplane/authz", "nexoctl", "test/framework"},
}

// treeOf is the tree a package path (relative to the module) belongs to; test suites
// (test/<suite>, other than test/framework) are "test" and may import anything.
func treeOf(rel string) string {
	parts := strings.Split(rel, "/")
	switch {
	case len(parts) > 1 && parts[0] == "controllers" && parts[1] == "render":
		return "controllers/render"
	case len(parts) > 1 && parts[0] == "controlplane" && (parts[1] == "targeting" || parts[1] == "storage" || parts[1] == "authz"):
		return "controlplane/" + parts[1]
	case parts[0] == "cmd" && len(parts) > 1:
		return "cmd/" + parts[1]
	case parts[0] == "test" && len(parts) > 1 && parts[1] == "framework":
		return "test/framework"
	case parts[0] == "test":
		return "test"
	}
	return parts[0]
}

type pkg struct {
	ImportPath string
	Imports    []string
}

func listPackages(t *testing.T) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports", module+"/...")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 40 {
		t.Fatalf("go list found only %d packages", len(pkgs))
	}
	return pkgs
}

// TestImportsRunDownward fails on a package outside every tree, and on a product import that
// runs sideways or up.
func TestImportsRunDownward(t *testing.T) {
	for _, p := range listPackages(t) {
		from := treeOf(strings.TrimPrefix(p.ImportPath, module+"/"))
		if from == "test" {
			continue
		}
		allowed, ok := below[from]
		if !ok {
			t.Errorf("%s is in no tree of the floor plan: add %q to the table in test/layout and docs/development.md", p.ImportPath, from)
			continue
		}
		for _, imp := range p.Imports {
			if !strings.HasPrefix(imp, module+"/") {
				continue
			}
			to := treeOf(strings.TrimPrefix(imp, module+"/"))
			if to != from && !slices.Contains(allowed, to) {
				t.Errorf("%s imports %s: %s may import only %v", p.ImportPath, imp, from, allowed)
			}
		}
	}
}

// httpFree are the Control Plane's layers below its HTTP handlers: they decide and store, and
// never see a request or write an answer.
var httpFree = []string{"controlplane/targeting", "controlplane/storage", "controlplane/authz"}

// TestControlPlaneLayersKnowNoHTTP fails when storage, authorization or the targeting decisions
// import net/http: the HTTP layer turns their errors into answers, they do not.
func TestControlPlaneLayersKnowNoHTTP(t *testing.T) {
	found := 0
	for _, p := range listPackages(t) {
		rel := strings.TrimPrefix(p.ImportPath, module+"/")
		if !slices.Contains(httpFree, treeOf(rel)) {
			continue
		}
		found++
		for _, imp := range p.Imports {
			if imp == "net/http" || strings.HasPrefix(imp, "net/http/") {
				t.Errorf("%s imports %s: the Control Plane's HTTP layer is package controlplane", p.ImportPath, imp)
			}
		}
	}
	if found != len(httpFree) {
		t.Errorf("found %d of the %d layers %v", found, len(httpFree), httpFree)
	}
}

// TestTreesFormNoCycle: the table itself is layered, so no chain of allowed imports between
// trees leads back to where it started.
func TestTreesFormNoCycle(t *testing.T) {
	trees := make([]string, 0, len(below))
	for tree := range below {
		trees = append(trees, tree)
	}
	sort.Strings(trees)
	const (
		unseen = iota
		open
		done
	)
	state := map[string]int{}
	var visit func(tree string, path []string)
	visit = func(tree string, path []string) {
		switch state[tree] {
		case open:
			t.Errorf("the trees form a cycle: %s", strings.Join(append(path, tree), " → "))
			return
		case done:
			return
		}
		state[tree] = open
		for _, next := range below[tree] {
			if _, ok := below[next]; !ok {
				t.Errorf("%s may import %q, which is no tree", tree, next)
				continue
			}
			visit(next, append(path, tree))
		}
		state[tree] = done
	}
	for _, tree := range trees {
		visit(tree, nil)
	}
}

// TestTreeOf pins the path rules the table relies on.
func TestTreeOf(t *testing.T) {
	for rel, want := range map[string]string{
		"contract/wire":              "contract",
		"cmd/manager":                "cmd/manager",
		"test/framework/testcluster": "test/framework",
		"test/e2e":                   "test",
		"controllers/render":         "controllers/render",
		"controllers/slimcache":      "controllers",
		"hack/genpkg":                "hack",
		"controlplane/storage":       "controlplane/storage",
		"controlplane/authz":         "controlplane/authz",
		"controlplane/cli":           "controlplane",
	} {
		if got := treeOf(rel); got != want {
			t.Errorf("treeOf(%q) = %q, want %q", rel, got, want)
		}
	}
}
