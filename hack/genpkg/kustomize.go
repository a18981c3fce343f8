package main

import (
	"os"

	"strings"

	rbacv1 "k8s.io/api/rbac/v1"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/yaml"

	"github.com/nexo-io/nexo-edge/config/admission"
)

// writeKustomizeRBAC writes config/rbac/role.yaml (the split roles with the kustomize names) and
// config/rbac/aggregate_roles.yaml.
func writeKustomizeRBAC(r operatorRules) error {
	header := generatedHeader + "# The operator's roles, split from config/rbac/generated (docs/rbac.md). nexo-operator-secret-copies\n" +
		"# is bound by a RoleBinding in each namespace where proxies may receive pull-Secret copies; never cluster-wide.\n"
	if err := writeYAML("config/rbac/role.yaml", header,
		role("nexo-operator", "", r.workload, nil),
		role("nexo-operator-secret-copies", "", r.secretCopies, nil),
		role("nexo-operator", "nexo-system", r.operatorNamespace, nil)); err != nil {
		return err
	}
	var aggregated []any
	for _, a := range aggregatedRoleList() {
		name := a["Name"].(string)
		aggregated = append(aggregated, role("nexo-edge-"+name, "", a["Rules"].([]rbacv1.PolicyRule),
			map[string]string{"rbac.authorization.k8s.io/aggregate-to-" + name: "true"}))
	}
	return writeYAML("config/rbac/aggregate_roles.yaml",
		generatedHeader+"# Rights on the nexo.io kinds for the built-in view, edit and admin ClusterRoles (docs/rbac.md).\n", aggregated...)
}

// bindingYAML is an installation's binding as YAML, without the empty creationTimestamp.
func bindingYAML(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) (string, error) {
	raw, err := yaml.Marshal(b)
	return strings.Replace(string(raw), "  creationTimestamp: null\n", "", 1), err
}

// kustomizeAdmissionInstallation writes config/admission/installation.yaml: the nexo-system
// installation's binding, with its parameters (all namespaces; config/namespaced narrows them).
func kustomizeAdmissionInstallation() error {
	// Named as 0.2.0's kustomize binding, so that re-applying upgrades it in place: kubectl apply
	// prunes nothing, and the old parameterless binding would be misconfigured under the new policy.
	binding := admission.Installation("nexo-system", nil)
	binding.Name, binding.Spec.ParamRef.Name = admission.ManagedObjectsPolicy, admission.ManagedObjectsPolicy
	b, err := bindingYAML(binding)
	if err != nil {
		return err
	}
	// The Manager's deploy limit: empty (nothing) until an overlay sets the ConfigMap
	// nexo-manager-limits, whose values kustomize's replacements copy here (config/default).
	limit := admission.DeployLimit("nexo-system", nil, nil)
	limit.Name, limit.Spec.ParamRef.Name = admission.DeployLimitPolicy, admission.DeployLimitPolicy
	d, err := bindingYAML(limit)
	if err != nil {
		return err
	}
	out := generatedHeader + "# This installation's binding of the nexo-managed-objects policy; its annotations are its parameters:\n" +
		"# its Manager and the namespaces it serves (\"*\": all; config/namespaced narrows them).\n" + b +
		"---\n# The binding of the nexo-manager-deploy-limit policy: the Manager's limits, copied from the ConfigMap\n" +
		"# nexo-manager-limits by the replacements of config/default (empty: nothing).\n" + d
	return os.WriteFile("config/admission/installation.yaml", []byte(out), 0o644)
}
