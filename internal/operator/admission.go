package operator

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/nexo-io/nexo-edge/config/admission"
	"github.com/nexo-io/nexo-edge/controllers"
)

// admissionPolicyApplier applies the managed-objects admission policy and its binding once the
// operator leads, admitting the nexo-manager ServiceAccount of the operator's namespace. The
// policy then lives in the API server, so it holds while the operator is down. A failure (the
// RBAC for it missing, say) is logged and retried with backoff; it never stops reconciliation.
func admissionPolicyApplier(c client.Client, namespace string) manager.RunnableFunc {
	return func(ctx context.Context) error {
		log := ctrl.Log.WithName("admission-policy")
		backoff := wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.2, Steps: 1 << 30, Cap: 5 * time.Minute}
		_ = wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
			if err := ApplyAdmissionPolicy(ctx, c, namespace); err != nil {
				log.Error(err, "cannot apply the managed-objects admission policy; retrying")
				return false, nil
			}
			log.Info("managed-objects admission policy applied", "manager", "system:serviceaccount:"+namespace+":nexo-manager")
			return true, nil
		})
		return nil
	}
}

// ApplyAdmissionPolicy server-side applies the policy and its binding once, admitting the
// nexo-manager ServiceAccount of namespace.
func ApplyAdmissionPolicy(ctx context.Context, c client.Client, namespace string) error {
	policy, binding, err := admission.Policy(namespace)
	if err != nil {
		return err
	}
	for _, o := range []client.Object{policy, binding} {
		if err := c.Patch(ctx, o, client.Apply, controllers.FieldOwner, client.ForceOwnership); err != nil {
			return err
		}
	}
	return nil
}
