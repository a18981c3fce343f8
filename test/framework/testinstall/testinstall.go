// Package testinstall installs the product into a test cluster the way a user does (the
// embedded Helm chart, through the Helm SDK) and hands out clients that act as the chart's
// ServiceAccounts, so tests exercise the product's own RBAC rather than an admin's.
package testinstall

import (
	"context"
	"fmt"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/cli"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/nexo-io/nexo-edge/charts"
	"github.com/nexo-io/nexo-edge/contract/wire"
	"github.com/nexo-io/nexo-edge/test/framework/testcluster"
)

// Namespace is where the tests install the chart (the product's default).
const Namespace = "nexo-system"

// Chart installs the embedded chart as release "nexo-edge" into ns with values, without waiting
// (the pods are simulated or absent; tests run the binaries themselves). The CRDs are normally
// installed by testcluster already, so callers usually pass crds.install=false.
func Chart(c *testcluster.Cluster, ns string, values map[string]any) error {
	settings := cli.New()
	settings.KubeConfig = c.Kubeconfig
	settings.SetNamespace(ns)
	cfg := new(action.Configuration)
	if err := cfg.Init(settings.RESTClientGetter(), ns, "secret", func(string, ...any) {}); err != nil {
		return err
	}
	ch, err := charts.NexoEdge()
	if err != nil {
		return err
	}
	inst := action.NewInstall(cfg)
	inst.ReleaseName, inst.Namespace, inst.CreateNamespace = "nexo-edge", ns, true
	if _, err := inst.Run(ch, values); err != nil {
		return fmt.Errorf("helm install: %w", err)
	}
	return nil
}

// Values is the chart configuration the tests use: no CRDs (testcluster installed them), the
// given watched namespaces and environment, everything else default.
func Values(environmentID string, watch []string, extra map[string]any) map[string]any {
	ns := make([]any, len(watch))
	for i, w := range watch {
		ns[i] = w
	}
	v := map[string]any{
		"crds":          map[string]any{"install": false},
		"environmentID": environmentID,
		"operator":      map[string]any{"watchNamespaces": ns},
		// The cluster's own limit: the watched namespaces, or every namespace when all are
		// watched (tests that check the limit set their own).
		"manager": map[string]any{"controlPlaneURL": "https://cp.example.invalid", "deployNamespaces": deployNamespaces(ns), "allowedImageRepositories": []any{"*"}},
	}
	for k, x := range extra {
		if m, ok := x.(map[string]any); ok {
			if have, ok := v[k].(map[string]any); ok {
				for mk, mv := range m {
					have[mk] = mv
				}
				continue
			}
		}
		v[k] = x
	}
	return v
}

// Operator and Manager return client configs that authenticate as the chart's ServiceAccounts.
func Operator(ctx context.Context, c *testcluster.Cluster) (*rest.Config, error) {
	return c.ServiceAccountConfig(ctx, Namespace, wire.OperatorName)
}

// Manager returns a client config for the chart's nexo-manager ServiceAccount.
func Manager(ctx context.Context, c *testcluster.Cluster) (*rest.Config, error) {
	return c.ServiceAccountConfig(ctx, Namespace, wire.ManagerName)
}

// Tenant returns a client config for the tenant of ns (docs/security.md, "Actors"): a plain user, tenant-<ns>,
// bound by a RoleBinding to edit rights on every Nexo kind and on Secrets in ns, and nothing else.
func Tenant(ctx context.Context, c *testcluster.Cluster, ns string) (*rest.Config, error) {
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return nil, err
	}
	user := "tenant-" + ns
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "tenant-edit", Namespace: ns}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{"nexo.io"}, Resources: []string{"*"}, Verbs: []string{"*"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"*"}},
	}}
	if _, err := cs.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "tenant-edit", Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "tenant-edit"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: user, APIGroup: rbacv1.GroupName}}}
	if _, err := cs.RbacV1().RoleBindings(ns).Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	return c.UserConfig(user)
}

func deployNamespaces(watched []any) []any {
	if len(watched) == 0 {
		return []any{"*"}
	}
	return watched
}
