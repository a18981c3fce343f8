package preflight

import (
	"context"
	"fmt"
	"io"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/catalog"
	"github.com/nexo-io/nexo-edge/contract/fingerprint"
	"github.com/nexo-io/nexo-edge/contract/manifest"
	"github.com/nexo-io/nexo-edge/contract/wire"
)

// Env is what the checks look at: a cluster, or a folder of manifests (Offline).
type Env struct {
	Client    client.Client
	Discovery discovery.DiscoveryInterface
	// Namespace the operator, the Manager and the connect-token Secret live in.
	Namespace string
	// Offline objects, read from a folder by LoadDir.
	Objects []*unstructured.Unstructured
	Offline bool
	// TokenSecret is the connect-token Secret's name.
	TokenSecret string

	crds []apiextensionsv1.CustomResourceDefinition // memo of installedCRDs
}

// NewClusterEnv connects to a cluster.
func NewClusterEnv(cfg *rest.Config, namespace string) (*Env, error) {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, apiextensionsv1.AddToScheme, nexov1alpha1.AddToScheme} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		return nil, err
	}
	d, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Env{Client: c, Discovery: d, Namespace: namespace, TokenSecret: wire.ConnectTokenSecret}, nil
}

// LoadDir reads manifests for offline checks: every .yaml/.yml/.json file under a folder, one
// file, or stdin for "-" (multi-document YAML and kind: List included).
func LoadDir(dir string, stdin io.Reader) (*Env, error) {
	objs, err := manifest.Load(dir, stdin)
	if err != nil {
		return nil, err
	}
	if len(objs) == 0 {
		return nil, fmt.Errorf("no Kubernetes manifests found in %s", dir)
	}
	return &Env{Offline: true, Objects: objs}, nil
}

// installedCRDs lists the nexo.io CRDs once per run; several checks read them.
func (e *Env) installedCRDs(ctx context.Context) ([]apiextensionsv1.CustomResourceDefinition, error) {
	if e.crds == nil {
		crds, err := fingerprint.NexoCRDs(ctx, e.Client)
		if err != nil {
			return nil, err
		}
		e.crds = crds
	}
	return e.crds, nil
}

// nexoObjects lists the Nexo objects of the given kinds: from the folder offline, from every
// namespace otherwise (kinds whose CRD is missing are skipped).
func (e *Env) nexoObjects(ctx context.Context, kinds ...string) ([]*unstructured.Unstructured, error) {
	if e.Offline {
		var out []*unstructured.Unstructured
		for _, o := range e.Objects {
			if o.GroupVersionKind().Group == catalog.Group && (len(kinds) == 0 || contains(kinds, o.GetKind())) {
				out = append(out, o)
			}
		}
		return out, nil
	}
	if len(kinds) == 0 {
		kinds = catalog.Names()
	}
	var out []*unstructured.Unstructured
	for _, k := range kinds {
		list := &unstructured.UnstructuredList{}
		list.SetAPIVersion(catalog.Group + "/" + catalog.Version)
		list.SetKind(k + "List")
		if err := e.Client.List(ctx, list); err != nil {
			continue // CRD not installed: reported by the CRD checks
		}
		for i := range list.Items {
			out = append(out, &list.Items[i])
		}
	}
	return out, nil
}

// deployment finds a Deployment by its app.kubernetes.io/name label in the install namespace.
func (e *Env) deployment(ctx context.Context, name string) (*appsv1.Deployment, error) {
	var list appsv1.DeploymentList
	if err := e.Client.List(ctx, &list, client.InNamespace(e.Namespace), client.MatchingLabels{"app.kubernetes.io/name": name}); err != nil {
		return nil, err
	}
	if len(list.Items) == 0 {
		return nil, nil
	}
	return &list.Items[0], nil
}

// OperatorVersion reads the running operator's version from its Deployment: the
// app.kubernetes.io/version label, else the image tag.
func OperatorVersion(d *appsv1.Deployment) string {
	if v := d.Labels["app.kubernetes.io/version"]; v != "" {
		return v
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		if i := strings.LastIndex(c.Image, ":"); i > strings.LastIndex(c.Image, "/") {
			return strings.TrimPrefix(c.Image[i+1:], "v")
		}
	}
	return ""
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// OperatorVersionInCluster returns the version of the nexo-operator Deployment in the install
// namespace, or "" when there is none.
func (e *Env) OperatorVersionInCluster(ctx context.Context) (string, error) {
	d, err := e.deployment(ctx, wire.OperatorName)
	if err != nil || d == nil {
		return "", err
	}
	return OperatorVersion(d), nil
}
