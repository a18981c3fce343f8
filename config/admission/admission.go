// Package admission embeds the ValidatingAdmissionPolicy that reserves Control-Plane-managed
// Nexo objects to the Manager (managed-objects.yaml), so the operator can apply it where an
// installer cannot ship it (OLM bundles carry no admission policies).
package admission

import (
	_ "embed"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/yaml"
)

//go:embed managed-objects.yaml
var policyYAML string

// ManagerUser is the username the policy admits as the Manager, for an install in nexo-system.
const ManagerUser = "system:serviceaccount:nexo-system:nexo-manager"

// Policy returns the policy and its binding, admitting the nexo-manager ServiceAccount of
// namespace as the Manager.
func Policy(namespace string) (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding, error) {
	docs := strings.Split(strings.ReplaceAll(policyYAML, ManagerUser, "system:serviceaccount:"+namespace+":nexo-manager"), "\n---\n")
	p := &admissionregistrationv1.ValidatingAdmissionPolicy{}
	b := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
	if err := yaml.UnmarshalStrict([]byte(docs[0]), p); err != nil {
		return nil, nil, err
	}
	if err := yaml.UnmarshalStrict([]byte(docs[1]), b); err != nil {
		return nil, nil, err
	}
	p.APIVersion, p.Kind = "admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy"
	b.APIVersion, b.Kind = "admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding"
	return p, b, nil
}
