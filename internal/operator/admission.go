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

// admissionPolicyApplier applies the installation's admission policies and their bindings
// (config/admission) once the operator leads, admitting the nexo-manager ServiceAccount of the
// operator's namespace. The
// policy then lives in the API server, so it holds while the operator is down. A failure (the
// RBAC for it missing, say) is logged and retried with backoff; it never stops reconciliation.
func admissionPolicyApplier(c client.Client, namespace string) manager.RunnableFunc {
	return func(ctx context.Context) error {
		log := ctrl.Log.WithName("admission-policy")
		backoff := wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.2, Steps: 1 << 30, Cap: 5 * time.Minute}
		_ = wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
			if err := ApplyAdmissionPolicy(ctx, c, namespace); err != nil {
				log.Error(err, "cannot apply the admission policies; retrying")
				return false, nil
			}
			log.Info("admission policies applied", "manager", "system:serviceaccount:"+namespace+":nexo-manager")
			return true, nil
		})
		return nil
	}
}

// ApplyAdmissionPolicy server-side applies every policy and its binding once, admitting the
// nexo-manager ServiceAccount of namespace.
func ApplyAdmissionPolicy(ctx context.Context, c client.Client, namespace string) error {
	pairs, err := admission.Policies(namespace)
	if err != nil {
		return err
	}
	for _, p := range pairs {
		for _, o := range []client.Object{p.Policy, p.Binding} {
			if err := c.Patch(ctx, o, client.Apply, controllers.FieldOwner, client.ForceOwnership); err != nil {
				return err
			}
		}
	}
	return nil
}
