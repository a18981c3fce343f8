package installcmd

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nexo-io/nexo-edge/contract/wire"
	"github.com/nexo-io/nexo-edge/nexoctl/cliopts"
)

// installConfig is what an OLM installation's ConfigMap (wire.InstallConfigMap) gets from the
// command line: the Control Plane URL (--control-plane-url, "" when not given) and the
// environment id (--set-string environmentID, else the connect token's).
type installConfig struct {
	controlPlaneURL, environmentID string
}

// The Subscription's config.env variables the installation ConfigMap stands in for: the
// Manager and the operator take an environment variable over the ConfigMap.
var configEnv = map[string]string{wire.ConfigControlPlane: "NEXO_CONTROL_PLANE_URL", wire.ConfigEnvironmentID: "NEXO_ENVIRONMENT_ID"}

// checkSubscription refuses values that the nexo-operator Subscription's config.env already sets
// to something else, naming both: the environment variable would win, and the value typed on the
// command line would be silently ignored. It changes nothing.
func checkSubscription(ctx context.Context, c client.Client, ns string, want installConfig) error {
	subs := &unstructured.UnstructuredList{}
	subs.SetGroupVersionKind(schema.GroupVersionKind{Group: "operators.coreos.com", Version: "v1alpha1", Kind: "SubscriptionList"})
	if err := c.List(ctx, subs, client.InNamespace(ns)); err != nil {
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			return nil // no Subscription kind: nothing to conflict with
		}
		return cliopts.Fail(cliopts.ExitCannot, "read the Subscriptions in %s: %s", ns, apierrors.ReasonForError(err))
	}
	given := map[string]string{wire.ConfigControlPlane: want.controlPlaneURL, wire.ConfigEnvironmentID: want.environmentID}
	flags := map[string]string{wire.ConfigControlPlane: "--control-plane-url", wire.ConfigEnvironmentID: "the connect token's environment (or --set-string environmentID)"}
	for _, sub := range subs.Items {
		if pkg, _, _ := unstructured.NestedString(sub.Object, "spec", "name"); pkg != "nexo-operator" {
			continue
		}
		env, _, _ := unstructured.NestedSlice(sub.Object, "spec", "config", "env")
		for _, e := range env {
			m, _ := e.(map[string]any)
			name, _ := m["name"].(string)
			value, _ := m["value"].(string)
			for key, variable := range configEnv {
				if name == variable && value != "" && given[key] != "" && given[key] != value {
					return cliopts.Fail(cliopts.ExitFailed, "the Subscription %s/%s sets %s=%s in spec.config.env, and %s says %s; the Subscription's value would win, so nothing was changed: "+
						"drop %s, or change the Subscription's config.env (OLM restarts the Deployments with it)", ns, sub.GetName(), variable, value, flags[key], given[key], flags[key])
				}
			}
		}
	}
	return nil
}

// applyInstallConfig creates or updates the installation ConfigMap with the values given (keys
// not given are kept), and returns created, updated or unchanged.
func applyInstallConfig(ctx context.Context, c client.Client, ns string, want installConfig) (string, error) {
	data := map[string]string{wire.ConfigEnvironmentID: want.environmentID}
	if want.controlPlaneURL != "" {
		data[wire.ConfigControlPlane] = want.controlPlaneURL
	}
	cm := &corev1.ConfigMap{}
	err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: wire.InstallConfigMap}, cm)
	switch {
	case apierrors.IsNotFound(err):
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: wire.InstallConfigMap, Namespace: ns, Labels: map[string]string{wire.PartOfLabel: wire.PartOf}}, Data: data}
		if err := c.Create(ctx, cm); err != nil {
			return "", cliopts.Fail(cliopts.ExitFailed, "create ConfigMap %s/%s: %s", ns, wire.InstallConfigMap, apierrors.ReasonForError(err))
		}
		return "created", nil
	case err != nil:
		return "", cliopts.Fail(cliopts.ExitFailed, "read ConfigMap %s/%s: %s", ns, wire.InstallConfigMap, apierrors.ReasonForError(err))
	}
	changed := false
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	for k, v := range data {
		if cm.Data[k] != v {
			cm.Data[k], changed = v, true
		}
	}
	if !changed {
		return "unchanged", nil
	}
	if err := c.Update(ctx, cm); err != nil {
		return "", cliopts.Fail(cliopts.ExitFailed, "update ConfigMap %s/%s: %s", ns, wire.InstallConfigMap, apierrors.ReasonForError(err))
	}
	return "updated", nil
}
