// Package admission embeds the ValidatingAdmissionPolicies of an installation, so the operator
// can apply them where an installer cannot ship them (OLM bundles carry no admission policies):
// managed-objects.yaml reserves Control-Plane-managed Nexo objects to the Manager, and
// no-token-secrets.yaml keeps the product's identities from minting ServiceAccount tokens.
package admission

import (
	_ "embed"
	"fmt"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/yaml"
)

var (
	//go:embed managed-objects.yaml
	managedObjectsYAML string
	//go:embed no-token-secrets.yaml
	noTokenSecretsYAML string
)

// Files are the policy files, each a ValidatingAdmissionPolicy then its binding; the chart's
// templates are generated from them.
var Files = map[string]string{"managed-objects.yaml": managedObjectsYAML, "no-token-secrets.yaml": noTokenSecretsYAML}

// ManagerUser is the username the policies admit as the Manager, for an install in nexo-system.
const ManagerUser = "system:serviceaccount:nexo-system:nexo-manager"

// Pair is one policy and its binding.
type Pair struct {
	Policy  *admissionregistrationv1.ValidatingAdmissionPolicy
	Binding *admissionregistrationv1.ValidatingAdmissionPolicyBinding
}

// Policies returns every policy with its binding, admitting the nexo-manager ServiceAccount of
// namespace as the Manager.
func Policies(namespace string) ([]Pair, error) {
	var out []Pair
	for _, src := range []string{managedObjectsYAML, noTokenSecretsYAML} {
		docs := strings.Split(strings.ReplaceAll(src, ManagerUser, "system:serviceaccount:"+namespace+":nexo-manager"), "\n---\n")
		if len(docs) != 2 {
			return nil, fmt.Errorf("admission: want a policy and its binding, found %d documents", len(docs))
		}
		p := Pair{Policy: &admissionregistrationv1.ValidatingAdmissionPolicy{}, Binding: &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}}
		if err := yaml.UnmarshalStrict([]byte(docs[0]), p.Policy); err != nil {
			return nil, err
		}
		if err := yaml.UnmarshalStrict([]byte(docs[1]), p.Binding); err != nil {
			return nil, err
		}
		p.Policy.APIVersion, p.Policy.Kind = "admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy"
		p.Binding.APIVersion, p.Binding.Kind = "admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding"
		out = append(out, p)
	}
	return out, nil
}
