package security_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nexo-io/nexo-edge/contract/wire"
	"github.com/nexo-io/nexo-edge/test/framework/testinstall"
)

// tokenSecret is a Secret the token controller would fill with a token for ServiceAccount sa.
func tokenSecret(ns, name, sa string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		Annotations: map[string]string{corev1.ServiceAccountNameKey: sa}}, Type: corev1.SecretTypeServiceAccountToken}
}

// TestNoProductIdentityMintsCredentials: neither the operator nor the Manager of any installation
// can create a ServiceAccount-token Secret. The Manager has no right to create Secrets at all
// (the install created the trusted-keys Secret it keeps); where RBAC does let a product identity
// create Secrets (the operator's pull-Secret copies), the nexo-no-token-secrets admission policy
// refuses the token type, and it does for the second installation too, with no edit. A tenant's
// own token Secrets are not the policy's business.
func TestNoProductIdentityMintsCredentials(t *testing.T) {
	ctx := context.Background()

	// Every install path creates the trusted-keys Secret: both chart installs did.
	for _, ns := range []string{namespaced.release, wide.release} {
		if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: wire.TrustedKeysSecret}, &corev1.Secret{}); err != nil {
			t.Errorf("the chart did not create the trusted-keys Secret in %s: %v", ns, err)
		}
	}

	// The Manager: RBAC refuses any Secret create, the trusted-keys name included.
	mgr := managerClient(t)
	for _, s := range []*corev1.Secret{
		tokenSecret(testinstall.Namespace, wire.TrustedKeysSecret+"-x", wire.OperatorName),
		{ObjectMeta: metav1.ObjectMeta{Namespace: testinstall.Namespace, Name: "anything"}},
	} {
		if err := mgr.Create(ctx, s); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "cannot create resource") {
			t.Errorf("the Manager creating Secret %s: %v, want an RBAC refusal", s.Name, err)
		}
	}

	// The operator of the all-namespaces install may create Secrets in shop (pull-Secret copies):
	// admission refuses the token type, although that installation ships no policy of its own.
	wideOperator := clientFor(t, func() (*rest.Config, error) {
		return cluster.ServiceAccountConfig(ctx, wide.release, wire.OperatorName)
	})
	var err error
	if pollErr := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		err = wideOperator.Create(ctx, tokenSecret("shop", "minted-by-operator", "default"))
		if err == nil {
			_ = admin.Delete(ctx, tokenSecret("shop", "minted-by-operator", "default"))
		}
		return err != nil, nil
	}); pollErr != nil {
		t.Fatal("the operator created a ServiceAccount-token Secret: the admission policy never refused it")
	}
	if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "never mint ServiceAccount credentials") ||
		!strings.Contains(err.Error(), "system:serviceaccount:"+wide.release+":nexo-operator") {
		t.Fatalf("the operator creating a token Secret: %v, want the admission policy's refusal naming it", err)
	}
	// A registry-credential copy of the same identity is still admitted.
	copySecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "copy-of-registry"}, Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{}}`)}}
	if err := wideOperator.Create(ctx, copySecret); err != nil {
		t.Errorf("the operator creating a registry-credential copy: %v", err)
	}
	_ = admin.Delete(ctx, copySecret)

	// The Manager, even given the RBAC by a careless admin, is refused by admission.
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: "elsewhere", Name: "careless-secret-writer"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create"}}}}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "elsewhere", Name: "careless-secret-writer"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: testinstall.Namespace, Name: wire.ManagerName}}}
	for _, o := range []client.Object{role, rb} {
		if err := admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		defer func() { _ = admin.Delete(ctx, o) }()
	}
	if pollErr := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		err = mgr.Create(ctx, tokenSecret("elsewhere", "minted-by-manager", "default"))
		return !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "cannot create resource"), nil // wait out RBAC propagation
	}); pollErr != nil {
		t.Fatalf("the RoleBinding never took effect: %v", err)
	}
	if err == nil || !strings.Contains(err.Error(), "never mint ServiceAccount credentials") {
		t.Fatalf("the Manager (with RBAC granted) creating a token Secret: %v, want the admission policy's refusal", err)
	}

	// A tenant's token Secret is admitted: the policy is about the product's identities only.
	tenant := asTenant(t, "shop")
	mine := tokenSecret("shop", "tenant-token", "default")
	if err := tenant.Create(ctx, mine); err != nil {
		t.Errorf("a tenant creating its own token Secret: %v", err)
	}
	_ = admin.Delete(ctx, mine)
}
