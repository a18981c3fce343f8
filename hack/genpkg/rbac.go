package main

import (
	"fmt"
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/nexo-io/nexo-edge/catalog"
	"github.com/nexo-io/nexo-edge/config/admission"
)

// operatorRules are the operator's rules, split by where they are granted (docs/rbac.md).
type operatorRules struct {
	// workload is granted in the watched namespaces (cluster-wide when all are watched): Nexo
	// kinds, their status, the proxies' children, and reading Secrets.
	workload []rbacv1.PolicyRule
	// secretCopies writes pull-Secret copies; only ever bound per namespace.
	secretCopies []rbacv1.PolicyRule
	// operatorNamespace is granted in the operator's own namespace.
	operatorNamespace []rbacv1.PolicyRule
}

var secretWriteVerbs = []string{"create", "update", "patch", "delete"}

// rbacRules reads the rules controller-gen generated from the markers and splits the Secret
// rule: its write verbs move into secretCopies, so no ClusterRoleBinding ever grants them.
func rbacRules() (operatorRules, error) {
	var out operatorRules
	byKind, err := rulesByKind("config/rbac/generated/role.yaml")
	if err != nil {
		return out, err
	}
	for _, r := range byKind["ClusterRole"] {
		if !slices.Equal(r.APIGroups, []string{""}) || !slices.Contains(r.Resources, "secrets") {
			out.workload = append(out.workload, r)
			continue
		}
		// controller-gen merges rules with equal verbs: take secrets out of this one.
		if others := slices.DeleteFunc(slices.Clone(r.Resources), func(x string) bool { return x == "secrets" }); len(others) > 0 {
			rest := r.DeepCopy()
			rest.Resources = others
			out.workload = append(out.workload, *rest)
		}
		read := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"},
			Verbs: slices.DeleteFunc(slices.Clone(r.Verbs), func(v string) bool { return slices.Contains(secretWriteVerbs, v) })}
		write := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"},
			Verbs: slices.DeleteFunc(slices.Clone(r.Verbs), func(v string) bool { return !slices.Contains(secretWriteVerbs, v) })}
		out.workload = append(out.workload, read)
		out.secretCopies = append(out.secretCopies, write)
	}
	out.operatorNamespace = byKind["Role"]
	if out.workload == nil || out.operatorNamespace == nil || out.secretCopies == nil {
		return out, fmt.Errorf("config/rbac/generated/role.yaml needs a ClusterRole with a secrets rule and a Role; run make manifests")
	}
	return out, nil
}

// aggregatedRules are the rules on every nexo.io kind that the built-in view, edit and admin
// ClusterRoles aggregate, as cert-manager ships them: namespace teams bound to edit or view can
// use Nexo objects. Managed objects stay Manager-only through the admission policy.
func aggregatedRules() map[string][]rbacv1.PolicyRule {
	var plurals []string
	for _, k := range catalog.Kinds {
		plurals = append(plurals, k.Plural)
	}
	view := rbacv1.PolicyRule{APIGroups: []string{catalog.Group}, Resources: plurals, Verbs: []string{"get", "list", "watch"}}
	edit := rbacv1.PolicyRule{APIGroups: []string{catalog.Group}, Resources: plurals, Verbs: []string{"create", "delete", "deletecollection", "patch", "update"}}
	return map[string][]rbacv1.PolicyRule{"view": {view}, "edit": {view, edit}, "admin": {view, edit}}
}

// admissionPolicyRules let the operator of an OLM install apply the admission policies
// (--ensure-admission-policy): create them, read them, and patch only the shared ones, by name.
// Its own binding it only creates (its name holds the install namespace, unknown here).
func admissionPolicyRules() ([]rbacv1.PolicyRule, error) {
	policies, bindings, err := admission.Shared()
	if err != nil {
		return nil, err
	}
	var names []string
	for _, p := range policies {
		names = append(names, p.Name)
	}
	for _, b := range bindings {
		if !slices.Contains(names, b.Name) {
			names = append(names, b.Name)
		}
	}
	resources := []string{"validatingadmissionpolicies", "validatingadmissionpolicybindings"}
	return []rbacv1.PolicyRule{
		{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: resources, Verbs: []string{"create", "get"}},
		{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: resources, ResourceNames: names, Verbs: []string{"patch"}},
	}, nil
}

// clusterScoped are the cluster-scoped resources the product's rules name. A CSV rule on them
// must be a clusterPermission; every other rule is a namespaced permission.
var clusterScoped = map[string]bool{
	"nodes": true, "namespaces": true, "customresourcedefinitions": true,
	"tokenreviews": true, "subjectaccessreviews": true,
	"validatingadmissionpolicies": true, "validatingadmissionpolicybindings": true,
}

// splitByScope sorts rules into namespaced and cluster-scoped ones (non-resource URLs are
// cluster-scoped). Equal namespaced rules are merged, since the operator's release-namespace
// Role repeats some of its watched rules. A rule that mixes both scopes is an error: split it
// at its source.
func splitByScope(rules []rbacv1.PolicyRule) (namespaced, cluster []rbacv1.PolicyRule, err error) {
	for _, r := range rules {
		n := 0
		for _, res := range r.Resources {
			if clusterScoped[res] {
				n++
			}
		}
		switch {
		case len(r.NonResourceURLs) > 0 || (n == len(r.Resources) && n > 0):
			cluster = append(cluster, r)
		case n == 0:
			if !slices.ContainsFunc(namespaced, func(x rbacv1.PolicyRule) bool { return equality.Semantic.DeepEqual(x, r) }) {
				namespaced = append(namespaced, r)
			}
		default:
			return nil, nil, fmt.Errorf("rule %v mixes cluster-scoped and namespaced resources; split it where it is written", r.Resources)
		}
	}
	return namespaced, cluster, nil
}
