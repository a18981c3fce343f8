// Package testinstall installs the product into a test cluster the way a user does (the
// embedded Helm chart, through the Helm SDK) and hands out clients that act as the chart's
// ServiceAccounts, so tests exercise the product's own RBAC rather than an admin's.
package testinstall

import (
	"context"
	"fmt"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/cli"
	"k8s.io/client-go/rest"

	"github.com/nexo-io/nexo-edge/charts"
	"github.com/nexo-io/nexo-edge/internal/testcluster"
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
	}
	for k, x := range extra {
		v[k] = x
	}
	return v
}

// Operator and Manager return client configs that authenticate as the chart's ServiceAccounts.
func Operator(ctx context.Context, c *testcluster.Cluster) (*rest.Config, error) {
	return c.ServiceAccountConfig(ctx, Namespace, "nexo-operator")
}

// Manager returns a client config for the chart's nexo-manager ServiceAccount.
func Manager(ctx context.Context, c *testcluster.Cluster) (*rest.Config, error) {
	return c.ServiceAccountConfig(ctx, Namespace, "nexo-manager")
}
