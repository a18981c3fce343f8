package testinstall

import (
	"context"
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nexo-io/nexo-edge/contract/wire"
	"github.com/nexo-io/nexo-edge/controllers/render"
)

// RuntimeContract is the runtime contract (docs/runtime.md) that a proxy's running config names:
// the routing ConfigMap of the revision its Deployment runs ("" for a release before there was
// one). An upgrade to a build with another contract rolls the proxy once.
func RuntimeContract(ctx context.Context, c client.Client, namespace, proxy string) (string, error) {
	d := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: proxy}, d); err != nil {
		return "", err
	}
	cm := &corev1.ConfigMap{}
	name := render.RoutingName(proxy, d.Spec.Template.Annotations[render.GraphRevisionKey])
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cm); err != nil {
		return "", err
	}
	var routing struct {
		ContractVersion string `json:"contractVersion"`
	}
	if err := json.Unmarshal([]byte(cm.Data["routing.json"]), &routing); err != nil {
		return "", fmt.Errorf("%s/%s routing.json: %w", namespace, name, err)
	}
	return routing.ContractVersion, nil
}

// ManagerStatus is what the Manager of namespace ns reports in its status ConfigMap (nil before
// it wrote one).
func ManagerStatus(ctx context.Context, c client.Client, ns string) map[string]string {
	cm := &corev1.ConfigMap{}
	_ = c.Get(ctx, client.ObjectKey{Namespace: ns, Name: wire.ManagerStatusConfigMap}, cm)
	return cm.Data
}
