package render_test

import (
	"math/rand"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nexo-io/nexo-edge/test/framework/randomgraph"
)

// FuzzRender renders random graphs within what the CRDs admit: never a panic; every name and
// label valid for its kind (a Service name is a DNS-1035 label, other names DNS-1123
// subdomains); the same graph renders the same objects. test/reliability sends the objects of
// random graphs to a real API server (TestRenderedObjectsAreAccepted).
func FuzzRender(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("a proxy with a router, steps, TLS, local access and metrics"))
	f.Add([]byte{62, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 0, 0, 0, 0})
	// Long random inputs: graphs that use every choice (long names, many steps, pull Secrets).
	r := rand.New(rand.NewSource(1))
	for i := 0; i < 16; i++ {
		b := make([]byte, 4000)
		r.Read(b)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		first, second := randomgraph.Objects(randomgraph.FromBytes(data)), randomgraph.Objects(randomgraph.FromBytes(data))
		if !reflect.DeepEqual(first, second) {
			t.Fatal("the same graph rendered different objects")
		}
		for _, o := range first {
			if errs := validName(o); len(errs) > 0 {
				t.Errorf("%T name %q: %s", o, o.GetName(), strings.Join(errs, "; "))
			}
			for k, v := range o.GetLabels() {
				if errs := append(validation.IsQualifiedName(k), validation.IsValidLabelValue(v)...); len(errs) > 0 {
					t.Errorf("%T %s label %s=%q: %s", o, o.GetName(), k, v, strings.Join(errs, "; "))
				}
			}
		}
	})
}

// validName checks an object's name the way the API server does for its kind.
func validName(o client.Object) []string {
	if _, ok := o.(*corev1.Service); ok {
		return validation.IsDNS1035Label(o.GetName())
	}
	return validation.IsDNS1123Subdomain(o.GetName())
}
