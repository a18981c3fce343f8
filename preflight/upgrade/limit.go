package upgrade

import (
	"context"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nexo-io/nexo-edge/contract/protocol"
	"github.com/nexo-io/nexo-edge/contract/wire"
)

// DeployLimit is the cluster's deploy limit the installed Manager is given (docs/security.md,
// "The cluster's own limit"), as its Deployment sets it. Releases before 0.3.0 had none: their
// Managers deployed anywhere, and after the upgrade the limit is empty unless the upgrade sets
// it, so the new Manager refuses every deploy.
type DeployLimit struct {
	// Namespaces is the limit ("" when empty: the Manager deploys nowhere).
	Namespaces string `json:"namespaces"`
	// From says where the value was read (a flag, a variable, a ConfigMap key).
	From string `json:"from"`
	OK   bool   `json:"ok"`
	// Message says what follows, and what to set when the limit is empty.
	Message string `json:"message"`
}

// deployNamespacesEnv is the Manager's variable for the limit (its --deploy-namespaces default).
const deployNamespacesEnv = "NEXO_DEPLOY_NAMESPACES"

// ReadDeployLimit reads the limit from the Manager Deployment in ns: its --deploy-namespaces
// argument, else its NEXO_DEPLOY_NAMESPACES variable, resolving a ConfigMap reference.
func ReadDeployLimit(ctx context.Context, c client.Client, ns string) (DeployLimit, error) {
	d := &appsv1.Deployment{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: wire.ManagerName}, d); err != nil {
		if apierrors.IsNotFound(err) {
			return DeployLimit{OK: true, Message: "no Manager is installed in " + ns + ": nothing is deployed from the Control Plane"}, nil
		}
		return DeployLimit{}, err
	}
	if len(d.Spec.Template.Spec.Containers) == 0 {
		return limitVerdict("", "the Manager Deployment has no container"), nil
	}
	ctr := d.Spec.Template.Spec.Containers[0]
	for _, a := range ctr.Args {
		if v, ok := strings.CutPrefix(a, "--deploy-namespaces="); ok {
			return limitVerdict(v, "the Manager's --deploy-namespaces"), nil
		}
	}
	for _, e := range ctr.Env {
		if e.Name != deployNamespacesEnv {
			continue
		}
		if e.ValueFrom == nil || e.ValueFrom.ConfigMapKeyRef == nil {
			return limitVerdict(e.Value, "the Manager's "+deployNamespacesEnv), nil
		}
		ref := e.ValueFrom.ConfigMapKeyRef
		cm := &corev1.ConfigMap{}
		from := fmt.Sprintf("key %s of the ConfigMap %s", ref.Key, ref.Name)
		if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: ref.Name}, cm); err != nil {
			if apierrors.IsNotFound(err) {
				return limitVerdict("", from+" (missing)"), nil
			}
			return DeployLimit{}, err
		}
		return limitVerdict(cm.Data[ref.Key], from), nil
	}
	return limitVerdict("", "no limit: the installed Manager predates it"), nil
}

func limitVerdict(namespaces, from string) DeployLimit {
	l := DeployLimit{Namespaces: strings.TrimSpace(namespaces), From: from}
	if l.Namespaces == "" {
		l.Message = "after the upgrade the Manager deploys nowhere: the cluster's deploy limit is empty (" + from + "), so it refuses every deploy, rollout and uninstall the Control Plane sends. " +
			"Set it with the upgrade: " + protocol.NamespaceLimitHint("<namespace>")
		return l
	}
	l.OK = true
	l.Message = fmt.Sprintf("the Manager deploys into %s (%s)", l.Namespaces, from)
	return l
}
