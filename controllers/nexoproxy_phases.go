package controllers

import (
	"context"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/controllers/render"
	"github.com/nexo-io/nexo-edge/controllers/slimcache"
)

// proxyScope is one reconcile pass over a NexoProxy: what its phases read and decided. The
// phases fill it in order; proxyStatus computes the status (conditions and phase) from it, once.
type proxyScope struct {
	proxy *nexov1alpha1.NexoProxy
	key   types.NamespacedName
	// running is the Deployment the proxy controls at the start of the pass (nil: none yet).
	running *slimcache.DeploymentState

	res *resolved
	// revision and configHash of the resolved graph, and the Deployment once they are applied.
	revision, configHash string
	applied              *slimcache.DeploymentState

	// passed is the message of every phase that passed, by condition type.
	passed map[string]string
	// blockedAt is the phase that did not pass, and blocked why (nil: none).
	blockedAt string
	blocked   *blocked
	// applyErr is an API error met while writing the children (retried with backoff).
	applyErr error
}

// proxyPhase is one step of the NexoProxy reconcile. It returns the message of its condition
// when it passed, or why it is blocked; an error is retried with backoff.
type proxyPhase struct {
	condition string
	run       func(context.Context, *proxyScope) (passed string, b *blocked, err error)
}

// phases are the NexoProxy reconcile, in the order of nexov1alpha1.ProxyPhases. Every check
// comes before the workload phase, whose apply checks every child's name before its first
// write: a new revision reaches the workload whole or not at all (fail static).
func (r *ProxyReconciler) phases() []proxyPhase {
	return []proxyPhase{
		{nexov1alpha1.ConditionValidated, r.validatePhase},
		{nexov1alpha1.ConditionReferencesResolved, r.resolvePhase},
		{nexov1alpha1.ConditionLicensed, r.licensePhase},
		{nexov1alpha1.ConditionWorkloadAvailable, r.workloadPhase},
	}
}

// runPhases runs the phases until one is blocked or fails.
func (r *ProxyReconciler) runPhases(ctx context.Context, s *proxyScope) error {
	for _, ph := range r.phases() {
		msg, b, err := ph.run(ctx, s)
		if err != nil {
			return err
		}
		if b != nil {
			s.blockedAt, s.blocked = ph.condition, b
			return nil
		}
		s.passed[ph.condition] = msg
	}
	return nil
}

// validatePhase: the managed signature, the proxy's own rules, and its image.
func (r *ProxyReconciler) validatePhase(ctx context.Context, s *proxyScope) (string, *blocked, error) {
	if bad := checkSignature(s.proxy, r.Keys, r.RequireSignatures); bad != nil {
		return "", &blocked{reason: bad.reason, message: bad.message}, nil
	}
	if bad := invalidOf(s.proxy.Validate()); bad != nil {
		return "", &blocked{reason: bad.reason, message: bad.message}, nil
	}
	if b, err := r.checkImage(ctx, s.proxy); b != nil || err != nil {
		return "", b, err
	}
	return "spec is valid", nil, nil
}

// checkImage refuses a spec.proxyImage that the proxy's NexoDeploymentProfile does not approve:
// whoever may edit a NexoProxy may pick among the images the profile's owner approved, and
// nothing else. A profile that cannot be read yet is left to the references phase.
func (r *ProxyReconciler) checkImage(ctx context.Context, proxy *nexov1alpha1.NexoProxy) (*blocked, error) {
	image := proxy.Spec.ProxyImage
	if image == "" {
		return nil, nil
	}
	profile := &nexov1alpha1.NexoDeploymentProfile{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: proxy.Namespace, Name: proxy.Spec.ProfileRef.Name}, profile); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	if profile.Spec.Approves(image) {
		return nil, nil
	}
	return &blocked{reason: nexov1alpha1.ReasonImageNotApproved, message: nexov1alpha1.ImageNotApprovedMessage(image, profile)}, nil
}

// resolvePhase reads the graph; a pull Secret that lost its shareable mark leaves the proxy
// namespace at once, even though the proxy is blocked.
func (r *ProxyReconciler) resolvePhase(ctx context.Context, s *proxyScope) (string, *blocked, error) {
	res, b, err := r.resolve(ctx, s.proxy)
	if res != nil {
		r.secrets.set(s.key, res.secretNames)
	}
	if err != nil {
		return "", nil, err
	}
	if b != nil {
		if res != nil && len(res.unshareable) > 0 {
			if err := r.pruneCopies(ctx, s.proxy, func(source string) bool { return !slices.Contains(res.unshareable, source) }); err != nil {
				return "", nil, err
			}
		}
		return "", b, nil
	}
	s.res = res
	return fmt.Sprintf("resolved pipeline %s with %d steps, profile %s and license %s",
		res.graph.Pipeline.Name, len(res.graph.Steps), res.graph.Profile.Name, res.license.Name), nil, nil
}

func (r *ProxyReconciler) licensePhase(ctx context.Context, s *proxyScope) (string, *blocked, error) {
	b, err := r.checkLicense(ctx, s.proxy, s.res)
	if err != nil || b != nil {
		return "", b, err
	}
	return "licensed by NexoLicense " + s.res.license.Name, nil, nil
}

// workloadPhase applies the revision. Once every replica runs it, the config no ReplicaSet can
// use any more goes, once per completed rollout (not on every pass over a converged proxy: the
// scan is over all ConfigMaps); a failed prune fails the pass before status records the
// revision as available, so it is retried.
func (r *ProxyReconciler) workloadPhase(ctx context.Context, s *proxyScope) (string, *blocked, error) {
	s.revision = render.Revision(s.res.graph)
	s.configHash = render.ConfigHash(render.ConfigData(s.res.graph, s.revision), s.res.secrets)
	applied, b, err := r.apply(ctx, s.proxy, s.res, s.configHash, s.revision)
	if err != nil || b != nil {
		return "", b, err
	}
	s.applied = applied
	if workloadOf(applied).available && s.proxy.Status.AvailableRevision != s.revision {
		if err := r.pruneRevisions(ctx, s.proxy); err != nil {
			return "", nil, err
		}
	}
	return "", nil, nil
}

// proxyStatus computes the proxy's status (conditions, phase, revisions, replicas) from the
// pass, in one place:
//   - phases that passed are True;
//   - an API error while applying is ApplyFailed (Degraded with a running revision, Failed
//     without), and the revisions stay as they were;
//   - a blocked phase is False with its reason, the later ones Unknown (Blocked); a running
//     workload keeps its last good revision and the proxy is Degraded, otherwise it is Pending
//     while it waits for a reference and Failed when it needs a change;
//   - otherwise the applied revision is recorded and the workload decides: Ready when every
//     replica runs it, Progressing while it rolls, Degraded (RolloutStalled) past the profile's
//     progress deadline.
func proxyStatus(s *proxyScope) {
	p := s.proxy
	for _, cond := range nexov1alpha1.ProxyPhases {
		if msg, ok := s.passed[cond]; ok && cond != nexov1alpha1.ConditionWorkloadAvailable {
			setCondition(p, cond, metav1.ConditionTrue, nexov1alpha1.ReasonPassed, msg)
		}
	}
	switch {
	case s.applyErr != nil:
		msg := s.applyErr.Error() + "; retrying with backoff"
		setCondition(p, nexov1alpha1.ConditionWorkloadAvailable, metav1.ConditionFalse, nexov1alpha1.ReasonApplyFailed, msg)
		setCondition(p, nexov1alpha1.ConditionReady, metav1.ConditionFalse, nexov1alpha1.ReasonApplyFailed, msg)
		p.Status.Phase = nexov1alpha1.ProxyFailed
		if p.Status.GraphRevision != "" {
			p.Status.Phase = nexov1alpha1.ProxyDegraded
		}
	case s.blocked != nil:
		blockedStatus(s)
	default:
		if old := p.Status.GraphRevision; old != "" && old != s.revision {
			p.Status.PreviousRevision = old
		}
		p.Status.GraphRevision, p.Status.ConfigHash = s.revision, s.configHash
		w := reportWorkload(p, s.applied)
		switch {
		case w.stalled:
			p.Status.Phase = nexov1alpha1.ProxyDegraded
			msg := fmt.Sprintf("the rollout of graph revision %s made no progress within the profile's progressDeadlineSeconds (ProgressDeadlineExceeded): %d/%d replicas ready", s.revision, w.ready, w.replicas)
			if p.Status.AvailableRevision != "" && p.Status.AvailableRevision != s.revision {
				msg += "; the old pods keep serving graph revision " + p.Status.AvailableRevision
			}
			setCondition(p, nexov1alpha1.ConditionReady, metav1.ConditionFalse, nexov1alpha1.ReasonRolloutStalled, msg)
		case w.available:
			p.Status.AvailableRevision = s.revision
			p.Status.Phase = nexov1alpha1.ProxyReady
			setCondition(p, nexov1alpha1.ConditionReady, metav1.ConditionTrue, nexov1alpha1.ReasonAvailable,
				fmt.Sprintf("serving graph revision %s with %d/%d replicas ready", s.revision, p.Status.ReadyReplicas, p.Status.Replicas))
		default:
			p.Status.Phase = nexov1alpha1.ProxyProgressing
			setCondition(p, nexov1alpha1.ConditionReady, metav1.ConditionFalse, nexov1alpha1.ReasonProgressing,
				fmt.Sprintf("rolling out graph revision %s: %d/%d replicas ready", s.revision, p.Status.ReadyReplicas, p.Status.Replicas))
		}
	}
}

// blockedStatus is proxyStatus for a blocked phase.
func blockedStatus(s *proxyScope) {
	p, b, phase, dep := s.proxy, s.blocked, s.blockedAt, s.running
	setCondition(p, phase, metav1.ConditionFalse, b.reason, b.message)
	for _, later := range nexov1alpha1.ProxyPhases[slices.Index(nexov1alpha1.ProxyPhases, phase)+1:] {
		if later == nexov1alpha1.ConditionWorkloadAvailable && dep != nil {
			continue // reported from the running workload below
		}
		setCondition(p, later, metav1.ConditionUnknown, nexov1alpha1.ReasonBlocked, "waiting for "+phase)
	}
	msg := b.message
	switch {
	case dep != nil:
		// A running workload keeps its last good revision (a conflict met while applying a new
		// revision included: nothing of it was written).
		if phase != nexov1alpha1.ConditionWorkloadAvailable {
			reportWorkload(p, dep)
		}
		p.Status.Phase = nexov1alpha1.ProxyDegraded
		msg = fmt.Sprintf("%s; the workload keeps running graph revision %s", b.message, p.Status.GraphRevision)
	case b.wait:
		p.Status.Phase = nexov1alpha1.ProxyPending
	default:
		p.Status.Phase = nexov1alpha1.ProxyFailed
	}
	setCondition(p, nexov1alpha1.ConditionReady, metav1.ConditionFalse, b.reason, msg)
}

// workload is what a proxy reports about its Deployment.
type workload struct {
	replicas, ready    int32
	available, stalled bool
}

// workloadOf summarises a Deployment: available means current, fully updated and every replica
// ready, with no surge pod left.
func workloadOf(dep *slimcache.DeploymentState) workload {
	want, s := dep.Replicas, dep.Status
	return workload{
		replicas: want, ready: s.ReadyReplicas,
		available: s.ObservedGeneration >= dep.Generation && s.UpdatedReplicas == want && s.ReadyReplicas == want &&
			s.Available == want && s.Replicas == want,
		stalled: s.ObservedGeneration >= dep.Generation && s.Stalled,
	}
}

// reportWorkload copies the Deployment's replica counts and availability into status.
func reportWorkload(p *nexov1alpha1.NexoProxy, dep *slimcache.DeploymentState) workload {
	w := workloadOf(dep)
	p.Status.Replicas, p.Status.ReadyReplicas = w.replicas, w.ready
	if w.available {
		setCondition(p, nexov1alpha1.ConditionWorkloadAvailable, metav1.ConditionTrue, nexov1alpha1.ReasonAvailable,
			fmt.Sprintf("Deployment %s has %d/%d replicas ready and updated", dep.Name, w.ready, w.replicas))
	} else {
		setCondition(p, nexov1alpha1.ConditionWorkloadAvailable, metav1.ConditionFalse, nexov1alpha1.ReasonProgressing,
			fmt.Sprintf("Deployment %s: %d/%d replicas ready; rollout in progress", dep.Name, w.ready, w.replicas))
	}
	return w
}
