// Package scheme builds the runtime.Scheme every Nexo binary talks to the API server with:
// Kubernetes' built-in types, the CRD types and the nexo.io kinds. The Manager needs it without
// the operator's controllers; the operator and nexoctl use the same one.
package scheme

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
)

// New returns a scheme with client-go's built-in types, apiextensions/v1 and nexo.io/v1alpha1.
func New() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	utilruntime.Must(nexov1alpha1.AddToScheme(s))
	return s
}
