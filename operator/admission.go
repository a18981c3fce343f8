package operator

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	"github.com/nexo-io/nexo-edge/config/admission"
	"github.com/nexo-io/nexo-edge/contract/protocol"
	"github.com/nexo-io/nexo-edge/controllers"
)

// admissionPolicyApplier applies the admission policies (config/admission) once the operator
// leads: the shared ones, and this installation's binding, admitting the
// nexo-manager ServiceAccount of the operator's namespace for the watched namespaces. The
// policies then live in the API server, so they hold while the operator is down. A failure
// (the RBAC for it missing, say) is logged and retried with backoff; it never stops
// reconciliation.
func admissionPolicyApplier(c client.Client, namespace string, watched []string, limits protocol.Limits) manager.RunnableFunc {
	return func(ctx context.Context) error {
		log := ctrl.Log.WithName("admission-policy")
		backoff := wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.2, Steps: 1 << 30, Cap: 5 * time.Minute}
		_ = wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
			if err := ApplyAdmissionPolicy(ctx, c, namespace, watched, limits); err != nil {
				log.Error(err, "cannot apply the admission policies; retrying")
				return false, nil
			}
			log.Info("admission policies applied", "manager", admission.ManagerUser(namespace), "namespaces", watched,
				"deployNamespaces", limits.Namespaces, "imageRepositories", limits.ImageRepositories)
			return true, nil
		})
		return nil
	}
}

// ApplyAdmissionPolicy server-side applies the shared policies and bindings, and creates this
// installation's two bindings (each carries its parameters): managed objects, and the Manager's
// deploy limit. The binding is only ever created (the
// operator may patch no binding but the shared ones, whose names are fixed): one that exists with
// another spec or parameters is reported, for an admin to delete so the operator recreates it. c
// must read from the API server, not a cache.
//
// The order matters on an upgrade from 0.2.0, which bound the policy by its own name without
// parameters: once the policy takes parameters such a binding would be misconfigured and, failing
// closed, refuse every nexo.io write. So the old binding is first pointed at this installation's
// binding as its parameter (ignored while the policy takes none), the installation's binding is
// created, and only then does the policy change. On a new cluster the policy comes first.
func ApplyAdmissionPolicy(ctx context.Context, c client.Client, namespace string, watched []string, limits protocol.Limits) error {
	policies, bindings, err := admission.Shared()
	if err != nil {
		return err
	}
	binding := admission.Installation(namespace, watched)
	legacy := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
	switch err := c.Get(ctx, client.ObjectKey{Name: admission.ManagedObjectsPolicy}, legacy); {
	case err == nil && legacy.Spec.ParamRef == nil: // one with parameters is kustomize's, another installation's
		repoint := binding.DeepCopy()
		repoint.Name, repoint.Annotations, repoint.Labels = admission.ManagedObjectsPolicy, nil, legacy.Labels
		repoint.Spec.ParamRef.Name = binding.Name
		if err := c.Patch(ctx, repoint, client.Apply, controllers.FieldOwner, client.ForceOwnership); err != nil {
			return fmt.Errorf("point the 0.2.0 binding %s at this installation's parameters: %w", legacy.Name, err)
		}
	case err != nil && !apierrors.IsNotFound(err):
		return err
	}
	var apply []client.Object
	for _, p := range policies {
		apply = append(apply, p)
	}
	for _, b := range bindings {
		apply = append(apply, b)
	}
	applyShared := func() error {
		for _, o := range apply {
			if err := c.Patch(ctx, o, client.Apply, controllers.FieldOwner, client.ForceOwnership); err != nil {
				return err
			}
		}
		return nil
	}
	// A binding with parameters can only be created once its policy exists (the API server reads
	// the policy's parameter kind to check the creator may read it). On a new cluster: the policy
	// first. On an upgrade: the binding first, as said above.
	switch err := c.Get(ctx, client.ObjectKey{Name: admission.ManagedObjectsPolicy}, &admissionregistrationv1.ValidatingAdmissionPolicy{}); {
	case apierrors.IsNotFound(err):
		if err := applyShared(); err != nil {
			return err
		}
		if err := createBinding(ctx, c, binding); err != nil {
			return err
		}
	case err != nil:
		return err
	default:
		if err := createBinding(ctx, c, binding); err != nil {
			return err
		}
		if err := applyShared(); err != nil {
			return err
		}
	}
	// The deploy-limit policy exists by now (applyShared), so its binding can be created. A
	// limit changed since (OLM config.env) finds the old binding: reported, for an admin to
	// delete it; the Manager holds the new limit itself meanwhile.
	return createBinding(ctx, c, admission.DeployLimit(namespace, limits.Namespaces, limits.ImageRepositories))
}

// createBinding creates the installation's binding, or checks that the one there is the same.
func createBinding(ctx context.Context, c client.Client, binding *admissionregistrationv1.ValidatingAdmissionPolicyBinding) error {
	err := c.Create(ctx, binding.DeepCopy())
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	have := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(binding), have); err != nil {
		return err
	}
	if !apiequality.Semantic.DeepDerivative(binding.Spec, have.Spec) {
		return fmt.Errorf("ValidatingAdmissionPolicyBinding %s exists with another spec or parameters (its spec differs); delete it and the operator recreates it", binding.Name)
	}
	for _, k := range slices.Sorted(maps.Keys(binding.Annotations)) {
		if have.Annotations[k] != binding.Annotations[k] {
			return fmt.Errorf("ValidatingAdmissionPolicyBinding %s exists with another spec or parameters (%s %q, want %q); delete it and the operator recreates it",
				binding.Name, k, have.Annotations[k], binding.Annotations[k])
		}
	}
	return nil
}
