package security_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/contract/wire"
)

// TestInstallationsSideBySide: two installations in one cluster (staging serving shop-staging,
// prod serving shop-prod), both installed with the chart's defaults and no edit. They share the
// cluster's one nexo-managed-objects policy, each binding it with its own parameters: each
// Manager creates and changes managed objects in its own namespaces, and is refused in the
// other's; a tenant is refused in both.
func TestInstallationsSideBySide(t *testing.T) {
	ctx := context.Background()
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	managerOf := func(in install) client.Client {
		return clientFor(t, func() (*rest.Config, error) { return cluster.ServiceAccountConfig(ctx, in.release, wire.ManagerName) })
	}
	for _, in := range []install{staging, prod} {
		if err := admin.Get(ctx, client.ObjectKey{Name: "nexo-managed-objects-" + in.release}, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}); err != nil {
			t.Fatalf("installation %s has no binding of its own: %v", in.release, err)
		}
	}
	policies := &admissionregistrationv1.ValidatingAdmissionPolicyList{}
	if err := admin.List(ctx, policies); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range policies.Items {
		if strings.HasPrefix(p.Name, "nexo-managed-objects") {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d nexo-managed-objects policies, want the cluster's one", n)
	}

	obj := func(ns, name string, rev int64) *nexov1alpha1.NexoRateLimit {
		rl := rateLimit(name)
		rl.Namespace = ns
		return signed(t, key, rl, rev)
	}
	// Each binding is loaded asynchronously: wait until a tenant is refused in both namespaces.
	for _, ns := range []string{"shop-staging", "shop-prod"} {
		var err error
		if pollErr := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			o := obj(ns, "probe", 1)
			err = asTenant(t, ns).Create(ctx, o)
			if err == nil {
				_ = admin.Delete(ctx, o)
			}
			return err != nil, nil
		}); pollErr != nil {
			t.Fatalf("a tenant could write a managed object in %s", ns)
		}
	}
	for _, c := range []struct {
		own, other install
		ownNS      string
		otherNS    string
	}{{staging, prod, "shop-staging", "shop-prod"}, {prod, staging, "shop-prod", "shop-staging"}} {
		mgr := managerOf(c.own)
		mine := obj(c.ownNS, "mine-"+c.own.release, 1)
		if err := mgr.Create(ctx, mine); err != nil {
			t.Errorf("%s's Manager creating a managed object in %s: %v", c.own.release, c.ownNS, err)
			continue
		}
		before := mine.DeepCopy()
		mine.Spec.OperationsPerSecond = 9
		if err := mgr.Patch(ctx, signed(t, key, mine, 2), client.MergeFrom(before)); err != nil {
			t.Errorf("%s's Manager changing its managed object: %v", c.own.release, err)
		}
		// In the other's namespace its RBAC grants it nothing; with RBAC granted there by mistake,
		// admission still refuses it: the other installation's binding names another Manager,
		// and its own deploy limit does not include the namespace.
		theirs := obj(c.otherNS, "theirs-"+c.own.release, 1)
		if err := mgr.Create(ctx, theirs.DeepCopy()); !apierrors.IsForbidden(err) {
			t.Errorf("%s's Manager creating a managed object in %s under its RBAC: %v, want forbidden", c.own.release, c.otherNS, err)
		}
		mistake := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "mistaken-" + c.own.release, Namespace: c.otherNS},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "nexo-manager-deploy-" + c.own.release},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: wire.ManagerName, Namespace: c.own.release}}}
		if err := admin.Create(ctx, mistake); err != nil {
			t.Fatal(err)
		}
		var err error
		if pollErr := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
			err = mgr.Create(ctx, theirs.DeepCopy())
			return err != nil && !strings.Contains(err.Error(), "cannot create resource"), nil
		}); pollErr != nil || err == nil ||
			!(strings.Contains(err.Error(), "is not the Manager of the Nexo installation serving namespace "+c.otherNS) && strings.Contains(err.Error(), "system:serviceaccount:"+c.other.release+":nexo-manager") ||
				strings.Contains(err.Error(), "outside this cluster's deploy limit")) {
			t.Errorf("%s's Manager creating a managed object in %s with RBAC granted: %v, want refused by admission", c.own.release, c.otherNS, err)
		}
		_ = admin.Delete(ctx, mistake)
		// The other installation's Manager may not change this one's object either.
		o := &nexov1alpha1.NexoRateLimit{}
		if err := admin.Get(ctx, client.ObjectKeyFromObject(mine), o); err != nil {
			t.Fatal(err)
		}
		o.Spec.Burst = 99
		if err := managerOf(c.other).Update(ctx, o); err == nil || !(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)) {
			t.Errorf("%s's Manager changing %s's managed object: %v", c.other.release, c.own.release, err)
		}
		// A tenant of the namespace is refused too.
		if err := asTenant(t, c.ownNS).Create(ctx, obj(c.ownNS, "forged", 1)); err == nil || !strings.Contains(err.Error(), "only the Nexo Manager") {
			t.Errorf("a tenant of %s creating a managed object: %v", c.ownNS, err)
		}
	}
}
