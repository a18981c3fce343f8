// Package targeting decides where a project stage may deploy on the reference Control Plane
// (docs/controlplane.md, "Targeting"): the roles a principal may hold, exact label selectors,
// and, for a project stage, which environments and namespace targets are eligible and which of
// those are deployable; and the license entitlement. Pure functions: the store feeds them, the
// API answers with them. What each role may do is controlplane/authz's capability table.
package targeting

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/nexo-io/nexo-edge/contract/protocol"
)

// Role is what a principal may be bound as, in a tenant (tenant admin) or a project.
type Role string

const (
	TenantAdmin    Role = "tenant-admin"
	ProjectManager Role = "project-manager"
	Editor         Role = "editor"
	Viewer         Role = "viewer"
)

// Roles, from most to least powerful.
var Roles = []Role{TenantAdmin, ProjectManager, Editor, Viewer}

// Selector is an exact label match: every key must be present with that value. An empty
// selector matches nothing (a stage must say where it deploys).
type Selector map[string]string

// Matches reports whether labels hold every pair of s (and s is not empty).
func (s Selector) Matches(labels map[string]string) bool {
	if len(s) == 0 {
		return false
	}
	for k, v := range s {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// Missing lists the pairs of s that labels lack or hold with another value, as k=v, sorted.
func (s Selector) Missing(labels map[string]string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(s)) {
		if got, ok := labels[k]; !ok || got != s[k] {
			out = append(out, k+"="+s[k])
		}
	}
	return out
}

// String is k=v pairs, sorted, comma-separated.
func (s Selector) String() string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(s)) {
		parts = append(parts, k+"="+s[k])
	}
	return strings.Join(parts, ",")
}

// ValidateLabels checks label pairs as Kubernetes does (qualified-name keys, label values). An
// expression (env in (a,b), !team, a||b) is refused: the contract is exact matches.
func ValidateLabels(what string, labels map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return fmt.Errorf("%s: key %q is not a label key (%s); selectors are exact key=value matches, not expressions", what, k, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(labels[k]); len(errs) > 0 {
			return fmt.Errorf("%s: value %q of %s is not a label value (%s); selectors are exact key=value matches, not expressions", what, labels[k], k, strings.Join(errs, "; "))
		}
	}
	return nil
}

// ValidateSelector is ValidateLabels, and refuses an empty selector.
func ValidateSelector(what string, s Selector) error {
	if len(s) == 0 {
		return fmt.Errorf("%s is empty: an empty selector matches nothing; name at least one label", what)
	}
	return ValidateLabels(what, s)
}

// Stage is a project stage: which environments (by their labels) and which of their namespace
// targets (by theirs) it deploys to.
type Stage struct {
	Project, Name    string
	Environments     Selector
	NamespaceTargets Selector
}

// Environment is what eligibility reads of an environment: its tenant, the labels a tenant admin
// set, its namespace targets, and its cluster's own limits as last reported (nil: never).
type Environment struct {
	ID, Tenant string
	Labels     map[string]string
	Targets    []NamespaceTarget
	Limits     *protocol.Limits
}

// NamespaceTarget is a namespace of an environment that stages may deploy to, with its labels.
type NamespaceTarget struct {
	Namespace string
	Labels    map[string]string
}

// Target is one row of a stage's targets: an environment's namespace target, whether the stage
// selects it (Eligible) and whether a deploy there would be queued (Deployable), with the reasons
// it would not.
type Target struct {
	Environment string   `json:"environment"`
	Namespace   string   `json:"namespace,omitempty"`
	Eligible    bool     `json:"eligible"`
	Deployable  bool     `json:"deployable"`
	Reasons     []string `json:"reasons,omitempty"`
}

// Targets answers, for a stage of a project in tenant, every environment of the tenant and each
// of its namespace targets: eligible when the environment's labels match the stage's environment
// selector and the target's labels its namespace selector; deployable when also the cluster's
// last reported limit allows the namespace. A visible target is not a permission: every row
// that is not deployable says why.
func Targets(tenant string, stage Stage, envs []Environment) []Target {
	var out []Target
	for _, e := range envs {
		if e.Tenant != tenant {
			continue
		}
		if !stage.Environments.Matches(e.Labels) {
			reason := "the environment's labels lack " + strings.Join(stage.Environments.Missing(e.Labels), ", ")
			if len(stage.Environments) == 0 {
				reason = "the stage's environment selector is empty"
			}
			out = append(out, Target{Environment: e.ID, Reasons: []string{reason}})
			continue
		}
		if len(e.Targets) == 0 {
			out = append(out, Target{Environment: e.ID, Reasons: []string{"the environment has no namespace targets"}})
			continue
		}
		for _, nt := range e.Targets {
			t := Target{Environment: e.ID, Namespace: nt.Namespace}
			switch {
			case !stage.NamespaceTargets.Matches(nt.Labels):
				t.Reasons = append(t.Reasons, "the namespace target's labels lack "+strings.Join(stage.NamespaceTargets.Missing(nt.Labels), ", "))
			default:
				t.Eligible = true
				switch {
				case e.Limits == nil:
					t.Reasons = append(t.Reasons, "eligible, but the cluster has not reported which namespaces it allows")
				case !e.Limits.AllowsNamespace(nt.Namespace):
					t.Reasons = append(t.Reasons, "eligible, refused by the cluster: "+nt.Namespace+" is not among the namespaces its Manager may deploy into")
				default:
					t.Deployable = true
				}
			}
			out = append(out, t)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Environment != out[j].Environment {
			return out[i].Environment < out[j].Environment
		}
		return out[i].Namespace < out[j].Namespace
	})
	return out
}
