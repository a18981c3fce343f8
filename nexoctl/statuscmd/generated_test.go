package statuscmd

import (
	"context"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/contract/scheme"
	"github.com/nexo-io/nexo-edge/contract/wire"
	"github.com/nexo-io/nexo-edge/controllers/render"
)

// nexoctl status lists the proxy's children of every kind in the table, a kind added to it
// included, and only the ones the proxy controls. (A pure unit test: the fake client stands in
// for the API server; the command itself is tested against a real one in nexoctl.)
func TestStatusListsEveryChildKind(t *testing.T) {
	p := &nexov1alpha1.NexoProxy{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "shop", UID: "u1"}}
	owned := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: "shop", Labels: map[string]string{wire.ProxyLabel: "p"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "nexo.io/v1alpha1", Kind: "NexoProxy", Name: "p", UID: "u1", Controller: ptr.To(true)}}}
	}
	stranger := owned("not-ours")
	stranger.OwnerReferences = nil
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(
		&appsv1.Deployment{ObjectMeta: owned("p")},
		&corev1.Service{ObjectMeta: owned("p")},
		&corev1.ConfigMap{ObjectMeta: owned("p-routing-r1")},
		&policyv1.PodDisruptionBudget{ObjectMeta: owned("p")},
		&corev1.ConfigMap{ObjectMeta: stranger},
	).Build()
	pdb := render.ChildKind{GVK: policyv1.SchemeGroupVersion.WithKind("PodDisruptionBudget"), New: func() client.Object { return &policyv1.PodDisruptionBudget{} }}
	got := generated(context.Background(), c, p, append(slices.Clone(render.Children), pdb))
	want := []string{"ConfigMap/p-routing-r1", "Deployment/p", "Service/p", "PodDisruptionBudget/p"}
	if !slices.Equal(got, want) {
		t.Errorf("generated %v, want %v", got, want)
	}
}
