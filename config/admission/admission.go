// Package admission holds the ValidatingAdmissionPolicies of Nexo Edge, so the chart and
// kustomize ship them and the operator can apply them where an installer cannot (OLM bundles
// carry no admission policies):
//
//   - managed-objects.yaml: the cluster's one nexo-managed-objects policy, which reserves
//     Control-Plane-managed Nexo objects to the Manager of the installation serving their
//     namespace. It names no installation: each binds it once, the binding carrying its own
//     parameters (Installation), so several installations share a cluster with no edit.
//   - deploy-limit.yaml: the cluster's one nexo-manager-deploy-limit policy, which refuses an
//     installation's Manager any nexo.io write outside the namespaces the cluster admin allows it
//     to deploy into, and any proxyImage outside the allowed image repositories. Each
//     installation binds it once with its own limits (DeployLimit).
//   - no-token-secrets.yaml: nexo-no-token-secrets and its binding, which keep every
//     installation's operator and Manager from minting ServiceAccount tokens.
//
// Shared objects are the same for every installation and version-for-version identical, so any
// installation may apply them.
package admission

import (
	_ "embed"
	"fmt"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

var (
	//go:embed managed-objects.yaml
	managedObjectsYAML string
	//go:embed deploy-limit.yaml
	deployLimitYAML string
	//go:embed no-token-secrets.yaml
	noTokenSecretsYAML string
)

// Files are the shared policy files, by name; the chart's templates are generated from them.
var Files = map[string]string{"managed-objects.yaml": managedObjectsYAML, "deploy-limit.yaml": deployLimitYAML, "no-token-secrets.yaml": noTokenSecretsYAML}

const (
	// ManagedObjectsPolicy is the policy each installation binds.
	ManagedObjectsPolicy = "nexo-managed-objects"
	// DeployLimitPolicy is the policy that holds each installation's Manager to its limits.
	DeployLimitPolicy = "nexo-manager-deploy-limit"
	// AllNamespaces is the namespaces parameter of an installation that serves every namespace.
	AllNamespaces = "*"
	partOf        = "nexo-edge"
)

// BindingName is the name of the binding of the installation in namespace.
func BindingName(namespace string) string { return ManagedObjectsPolicy + "-" + namespace }

// DeployLimitBindingName is the name of the deploy-limit binding of the installation in namespace.
func DeployLimitBindingName(namespace string) string { return DeployLimitPolicy + "-" + namespace }

// Shared returns the policies and bindings that are the same for every installation.
func Shared() ([]*admissionregistrationv1.ValidatingAdmissionPolicy, []*admissionregistrationv1.ValidatingAdmissionPolicyBinding, error) {
	var policies []*admissionregistrationv1.ValidatingAdmissionPolicy
	var bindings []*admissionregistrationv1.ValidatingAdmissionPolicyBinding
	for _, src := range []string{managedObjectsYAML, deployLimitYAML, noTokenSecretsYAML} {
		for _, doc := range strings.Split(src, "\n---\n") {
			var meta metav1.TypeMeta
			if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
				return nil, nil, err
			}
			switch meta.Kind {
			case "ValidatingAdmissionPolicy":
				p := &admissionregistrationv1.ValidatingAdmissionPolicy{}
				if err := yaml.UnmarshalStrict([]byte(doc), p); err != nil {
					return nil, nil, err
				}
				policies = append(policies, p)
			case "ValidatingAdmissionPolicyBinding":
				b := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
				if err := yaml.UnmarshalStrict([]byte(doc), b); err != nil {
					return nil, nil, err
				}
				bindings = append(bindings, b)
			default:
				return nil, nil, fmt.Errorf("admission: unexpected document kind %q", meta.Kind)
			}
		}
	}
	return policies, bindings, nil
}

// Installation annotations: the parameters an installation's binding carries for the policy.
const (
	ManagerAnnotation    = "nexo.io/admission-manager"
	NamespacesAnnotation = "nexo.io/admission-namespaces"
	// DeployNamespacesAnnotation and ImageRepositoriesAnnotation are a deploy-limit binding's
	// limits, comma-separated ("*": all; empty: none).
	DeployNamespacesAnnotation  = "nexo.io/admission-deploy-namespaces"
	ImageRepositoriesAnnotation = "nexo.io/admission-image-repositories"
)

// ManagerUser is the username of the Manager of the installation in namespace.
func ManagerUser(namespace string) string {
	return "system:serviceaccount:" + namespace + ":nexo-manager"
}

// Installation returns the binding of the installation in namespace, whose Manager is that
// namespace's nexo-manager ServiceAccount and which serves the watched namespaces (all when
// none). The binding is its own parameter object: the policy reads the two annotations above
// from it. A binding that cannot find its parameters denies (it fails closed).
func Installation(namespace string, watched []string) *admissionregistrationv1.ValidatingAdmissionPolicyBinding {
	scope := strings.Join(watched, ",")
	if scope == "" {
		scope = AllNamespaces
	}
	deny := admissionregistrationv1.DenyAction
	name := BindingName(namespace)
	return &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		TypeMeta: metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicyBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app.kubernetes.io/part-of": partOf},
			Annotations: map[string]string{ManagerAnnotation: ManagerUser(namespace), NamespacesAnnotation: scope}},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        ManagedObjectsPolicy,
			ParamRef:          &admissionregistrationv1.ParamRef{Name: name, ParameterNotFoundAction: &deny},
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
}

// DeployLimit returns the deploy-limit binding of the installation in namespace: its Manager may
// write nexo.io objects only in namespaces and set proxy images only from repositories (each "*"
// for all; empty for none). Like Installation's, the binding is its own parameter object and
// fails closed without it.
func DeployLimit(namespace string, namespaces, repositories []string) *admissionregistrationv1.ValidatingAdmissionPolicyBinding {
	deny := admissionregistrationv1.DenyAction
	name := DeployLimitBindingName(namespace)
	return &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		TypeMeta: metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicyBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app.kubernetes.io/part-of": partOf},
			Annotations: map[string]string{
				ManagerAnnotation:           ManagerUser(namespace),
				DeployNamespacesAnnotation:  strings.Join(namespaces, ","),
				ImageRepositoriesAnnotation: strings.Join(repositories, ","),
			}},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        DeployLimitPolicy,
			ParamRef:          &admissionregistrationv1.ParamRef{Name: name, ParameterNotFoundAction: &deny},
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
		},
	}
}
