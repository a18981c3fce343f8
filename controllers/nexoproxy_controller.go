package controllers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/catalog"
	"github.com/nexo-io/nexo-edge/render"
)

// waitRequeue is how soon a proxy waiting for a reference is checked again.
const (
	waitRequeue = 30 * time.Second
)

// ProxyReconciler reconciles NexoProxies into Deployments, Services, ConfigMaps and Secret
// copies through ordered phases: Validated → ReferencesResolved → Licensed → WorkloadAvailable
// → Ready. Until every phase before the workload passes, the running workload keeps its last
// good revision (fail static).
type ProxyReconciler struct {
	client.Client
	APIReader         client.Reader
	Scheme            *runtime.Scheme
	OperatorNamespace string
	Keys              *TrustedKeys
	RequireSignatures bool
	Now               func() time.Time
	KeysChanged       chan event.GenericEvent
	// Workers is the number of concurrent reconciles (default 4).
	Workers int
	// Recorder emits Events on NexoProxies (nil: none).
	Recorder events.EventRecorder

	secrets  secretUsers
	metrics  *proxyMetrics
	versions childVersions
	// What the children's and Secrets' informers show (fed by their recordingHandlers).
	deployments                      stateStore[*DeploymentState]
	services, configMaps, secretMeta stateStore[*ChildMeta]
	slots                            licenseSlots
}

// SetupWithManager registers the indexes, the watches on every referenced kind, Secrets
// (metadata only) and the owned children.
func (r *ProxyReconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	r.metrics = newProxyMetrics()
	idx := mgr.GetFieldIndexer()
	for _, f := range []string{indexProxyPipeline, indexProxyProfile, indexProxyLicense, indexProxyObserve} {
		if err := idx.IndexField(ctx, &nexov1alpha1.NexoProxy{}, f, indexProxy(f)); err != nil {
			return err
		}
	}
	if err := idx.IndexField(ctx, &nexov1alpha1.NexoPipeline{}, indexPipelineRefs, indexPipeline); err != nil {
		return err
	}
	if err := idx.IndexField(ctx, &nexov1alpha1.NexoLicense{}, indexLicenseDocument, licenseDocument); err != nil {
		return err
	}
	if err := r.slots.watch(ctx, mgr.GetCache()); err != nil {
		return err
	}
	if r.Workers < 1 {
		r.Workers = 4
	}
	c := mgr.GetCache()
	owner := handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &nexov1alpha1.NexoProxy{}, handler.OnlyControllerOwner())
	r.deployments.of = deploymentStateOf
	r.services.of, r.configMaps.of, r.secretMeta.of = childMetaOf, childMetaOf, childMetaOf
	b := ctrl.NewControllerManagedBy(mgr).
		Named("nexoproxies").
		WithOptions(controller.Options{MaxConcurrentReconciles: r.Workers}).
		For(&nexov1alpha1.NexoProxy{}, builder.WithPredicates(specOrSignatureChanged())).
		// Owns, but each informer's handler first records the object's state (child_meta.go).
		WatchesRawSource(source.Kind(c, client.Object(&appsv1.Deployment{}), handler.EventHandler(
			recordingHandler[*DeploymentState]{store: &r.deployments, then: []filtered{{deploymentChanged(), owner}}}))).
		WatchesRawSource(source.Kind(c, client.Object(metadataOf("Service")), handler.EventHandler(
			recordingHandler[*ChildMeta]{store: &r.services, then: []filtered{{childChanged(), owner}}}))).
		WatchesRawSource(source.Kind(c, client.Object(metadataOf("ConfigMap")), handler.EventHandler(
			recordingHandler[*ChildMeta]{store: &r.configMaps, then: []filtered{{childChanged(), owner}}}))).
		// Secrets: the pull-Secret copies are children; any Secret may be referenced.
		WatchesRawSource(source.Kind(c, client.Object(metadataOf("Secret")), handler.EventHandler(
			recordingHandler[*ChildMeta]{store: &r.secretMeta, then: []filtered{{childChanged(), owner},
				{nil, handler.EnqueueRequestsFromMapFunc(r.secrets.proxiesFor)}}}))).
		Watches(&nexov1alpha1.NexoProxy{}, handler.EnqueueRequestsFromMapFunc(r.proxiesSharingLicense),
			builder.WithPredicates(predicate.Funcs{
				CreateFunc:  func(event.CreateEvent) bool { return false },
				UpdateFunc:  func(event.UpdateEvent) bool { return false },
				GenericFunc: func(event.GenericEvent) bool { return false },
			})).
		WatchesRawSource(source.Channel(r.KeysChanged, &handler.EnqueueRequestForObject{}))
	for _, k := range catalog.Kinds {
		if k.Support != catalog.Reconciled || k.Kind == "NexoProxy" {
			continue
		}
		o, err := r.Scheme.New(nexov1alpha1.GroupVersion.WithKind(k.Kind))
		if err != nil {
			return err
		}
		b = b.Watches(o.(client.Object), handler.EnqueueRequestsFromMapFunc(r.proxiesForComponent(k.Kind)), builder.WithPredicates(readinessChanged()))
	}
	return b.Complete(r)
}

// Reconcile runs the phases in order and writes status once, only if it changed.
func (r *ProxyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	proxy := &nexov1alpha1.NexoProxy{}
	if err := r.Get(ctx, req.NamespacedName, proxy); err != nil {
		if client.IgnoreNotFound(err) == nil {
			r.secrets.set(req.NamespacedName, nil)
			r.metrics.forget(req.NamespacedName)
			r.versions.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !proxy.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil // owner references let garbage collection remove the children
	}
	before := proxy.DeepCopy()
	result, err := r.reconcilePhases(ctx, proxy)
	if err != nil && r.applyFailed(proxy, err) {
		// The failure is on status for people; the error makes controller-runtime back off.
		if werr := writeStatus(ctx, r.Client, before, proxy); werr != nil {
			logf.FromContext(ctx).Error(werr, "cannot record the apply failure")
		}
		return ctrl.Result{}, err
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	proxy.Status.ObservedGeneration = proxy.Generation
	r.metrics.observe(req.NamespacedName, proxy.Status.Phase)
	if err := writeStatus(ctx, r.Client, before, proxy); err != nil {
		return statusConflict(ctx, err)
	}
	r.recordTransitions(before, proxy)
	return result, nil
}

// applyFailed records an API error met while writing the children (nexov1alpha1.ReasonApplyFailed) and
// reports whether it did; errors while reading are left to the retry alone.
func (r *ProxyReconciler) applyFailed(proxy *nexov1alpha1.NexoProxy, err error) bool {
	var ae *applyError
	if !errors.As(err, &ae) {
		return false
	}
	msg := ae.Error() + "; retrying with backoff"
	setCondition(proxy, nexov1alpha1.ConditionWorkloadAvailable, metav1.ConditionFalse, nexov1alpha1.ReasonApplyFailed, msg)
	setCondition(proxy, nexov1alpha1.ConditionReady, metav1.ConditionFalse, nexov1alpha1.ReasonApplyFailed, msg)
	if proxy.Status.GraphRevision != "" {
		proxy.Status.Phase = nexov1alpha1.ProxyDegraded
	} else {
		proxy.Status.Phase = nexov1alpha1.ProxyFailed
	}
	return true
}

func (r *ProxyReconciler) reconcilePhases(ctx context.Context, proxy *nexov1alpha1.NexoProxy) (ctrl.Result, error) {
	key := types.NamespacedName{Namespace: proxy.Namespace, Name: proxy.Name}
	dep, ok := r.deployments.get(key)
	if !ok || !metav1.IsControlledBy(dep, proxy) {
		dep = nil
	}

	// Phase 1: Validated.
	if bad := checkSignature(proxy, r.Keys, r.RequireSignatures); bad != nil {
		return r.fail(ctx, proxy, dep, nexov1alpha1.ConditionValidated, &blocked{reason: bad.reason, message: bad.message})
	}
	setCondition(proxy, nexov1alpha1.ConditionValidated, metav1.ConditionTrue, nexov1alpha1.ReasonPassed, "spec is valid")

	// Phase 2: ReferencesResolved.
	res, b, err := r.resolve(ctx, proxy)
	if res != nil {
		r.secrets.set(key, res.secretNames)
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if b != nil {
		if res != nil && len(res.unshareable) > 0 {
			// A credential that lost its mark leaves the proxy namespace at once.
			if err := r.pruneCopies(ctx, proxy, func(source string) bool { return !slices.Contains(res.unshareable, source) }); err != nil {
				return ctrl.Result{}, err
			}
		}
		return r.fail(ctx, proxy, dep, nexov1alpha1.ConditionReferencesResolved, b)
	}
	setCondition(proxy, nexov1alpha1.ConditionReferencesResolved, metav1.ConditionTrue, nexov1alpha1.ReasonPassed,
		fmt.Sprintf("resolved pipeline %s with %d steps, profile %s and license %s", res.graph.Pipeline.Name, len(res.graph.Steps), res.graph.Profile.Name, res.license.Name))

	// Phase 3: Licensed.
	if b, err := r.checkLicense(ctx, proxy, res); err != nil || b != nil {
		if err != nil {
			return ctrl.Result{}, err
		}
		return r.fail(ctx, proxy, dep, nexov1alpha1.ConditionLicensed, b)
	}
	setCondition(proxy, nexov1alpha1.ConditionLicensed, metav1.ConditionTrue, nexov1alpha1.ReasonPassed, "licensed by NexoLicense "+res.license.Name)

	// Apply the rendered workload. Every check above passed, and apply checks every child's
	// name before its first write: a new revision is written whole or not at all.
	revision := render.Revision(res.graph)
	configHash := render.ConfigHash(render.ConfigData(res.graph, revision), res.secrets)
	applied, b, err := r.apply(ctx, proxy, res, configHash, revision)
	if err != nil {
		return ctrl.Result{}, err
	}
	if b != nil {
		return r.fail(ctx, proxy, dep, nexov1alpha1.ConditionWorkloadAvailable, b)
	}
	if old := proxy.Status.GraphRevision; old != "" && old != revision {
		proxy.Status.PreviousRevision = old
	}
	proxy.Status.GraphRevision, proxy.Status.ConfigHash = revision, configHash

	// Phase 4 and 5: WorkloadAvailable, Ready.
	r.reportWorkload(proxy, applied)
	if w := workloadOf(applied); w.stalled {
		proxy.Status.Phase = nexov1alpha1.ProxyDegraded
		msg := fmt.Sprintf("the rollout of graph revision %s made no progress within the profile's progressDeadlineSeconds (ProgressDeadlineExceeded): %d/%d replicas ready", revision, w.ready, w.replicas)
		if proxy.Status.AvailableRevision != "" && proxy.Status.AvailableRevision != revision {
			msg += "; the old pods keep serving graph revision " + proxy.Status.AvailableRevision
		}
		setCondition(proxy, nexov1alpha1.ConditionReady, metav1.ConditionFalse, nexov1alpha1.ReasonRolloutStalled, msg)
		return ctrl.Result{}, nil
	}
	if conditionTrue(proxy, nexov1alpha1.ConditionWorkloadAvailable) {
		// Every replica runs this revision: config no ReplicaSet can use any more goes, once per
		// completed rollout (not on every pass over a converged proxy: the scan is over all
		// ConfigMaps). A failed prune returns before status records the revision, so it retries.
		if proxy.Status.AvailableRevision != revision {
			if err := r.pruneRevisions(ctx, proxy); err != nil {
				return ctrl.Result{}, err
			}
		}
		proxy.Status.AvailableRevision = revision
		proxy.Status.Phase = nexov1alpha1.ProxyReady
		setCondition(proxy, nexov1alpha1.ConditionReady, metav1.ConditionTrue, nexov1alpha1.ReasonAvailable,
			fmt.Sprintf("serving graph revision %s with %d/%d replicas ready", revision, proxy.Status.ReadyReplicas, proxy.Status.Replicas))
	} else {
		proxy.Status.Phase = nexov1alpha1.ProxyProgressing
		setCondition(proxy, nexov1alpha1.ConditionReady, metav1.ConditionFalse, nexov1alpha1.ReasonProgressing,
			fmt.Sprintf("rolling out graph revision %s: %d/%d replicas ready", revision, proxy.Status.ReadyReplicas, proxy.Status.Replicas))
	}
	return ctrl.Result{}, nil
}

// fail records a blocked phase. Later phases are marked Blocked, the running workload (if any)
// is left at its last good revision, and the proxy is Degraded when such a workload exists,
// Pending when it waits for a reference, Failed otherwise.
func (r *ProxyReconciler) fail(ctx context.Context, proxy *nexov1alpha1.NexoProxy, dep *DeploymentState, phase string, b *blocked) (ctrl.Result, error) {
	logf.FromContext(ctx).V(1).Info("proxy blocked", "phase", phase, "reason", b.reason, "message", b.message)
	r.metrics.failure(b.reason)
	order := nexov1alpha1.ProxyPhases
	at := slices.Index(order, phase)
	setCondition(proxy, phase, metav1.ConditionFalse, b.reason, b.message)
	for _, later := range order[at+1:] {
		if later == nexov1alpha1.ConditionWorkloadAvailable && dep != nil {
			continue // reported from the running workload below
		}
		setCondition(proxy, later, metav1.ConditionUnknown, nexov1alpha1.ReasonBlocked, "waiting for "+phase)
	}
	msg := b.message
	switch {
	case dep != nil:
		// A running workload keeps its last good revision (a conflict met while applying a new
		// revision included: nothing of it was written).
		if phase != nexov1alpha1.ConditionWorkloadAvailable {
			r.reportWorkload(proxy, dep)
		}
		proxy.Status.Phase = nexov1alpha1.ProxyDegraded
		msg = fmt.Sprintf("%s; the workload keeps running graph revision %s", b.message, proxy.Status.GraphRevision)
	case b.wait:
		proxy.Status.Phase = nexov1alpha1.ProxyPending
	default:
		proxy.Status.Phase = nexov1alpha1.ProxyFailed
	}
	if dep == nil && phase != nexov1alpha1.ConditionWorkloadAvailable {
		setCondition(proxy, nexov1alpha1.ConditionWorkloadAvailable, metav1.ConditionUnknown, nexov1alpha1.ReasonBlocked, "waiting for "+phase)
	}
	setCondition(proxy, nexov1alpha1.ConditionReady, metav1.ConditionFalse, b.reason, msg)
	if b.wait {
		return ctrl.Result{RequeueAfter: waitRequeue}, nil
	}
	return ctrl.Result{}, nil
}

// workload is what a proxy reports about its Deployment.
type workload struct {
	replicas, ready    int32
	available, stalled bool
}

// workloadOf summarises a Deployment: available means current, fully updated and every replica
// ready, with no surge pod left.
func workloadOf(dep *DeploymentState) workload {
	want, s := dep.Replicas, dep.Status
	return workload{
		replicas: want, ready: s.ReadyReplicas,
		available: s.ObservedGeneration >= dep.Generation && s.UpdatedReplicas == want && s.ReadyReplicas == want &&
			s.Available == want && s.Replicas == want,
		stalled: s.ObservedGeneration >= dep.Generation && s.Stalled,
	}
}

// reportWorkload copies the Deployment's replica counts and availability into status.
func (r *ProxyReconciler) reportWorkload(proxy *nexov1alpha1.NexoProxy, dep *DeploymentState) {
	w := workloadOf(dep)
	proxy.Status.Replicas, proxy.Status.ReadyReplicas = w.replicas, w.ready
	if w.available {
		setCondition(proxy, nexov1alpha1.ConditionWorkloadAvailable, metav1.ConditionTrue, nexov1alpha1.ReasonAvailable,
			fmt.Sprintf("Deployment %s has %d/%d replicas ready and updated", dep.Name, w.ready, w.replicas))
		return
	}
	setCondition(proxy, nexov1alpha1.ConditionWorkloadAvailable, metav1.ConditionFalse, nexov1alpha1.ReasonProgressing,
		fmt.Sprintf("Deployment %s: %d/%d replicas ready; rollout in progress", dep.Name, w.ready, w.replicas))
}

// checkLicense requires a Ready license that entitles every step kind used and covers this
// proxy within maxProxies (proxies count in creation order).
func (r *ProxyReconciler) checkLicense(ctx context.Context, proxy *nexov1alpha1.NexoProxy, res *resolved) (*blocked, error) {
	lic := res.license
	if b := notReady(lic, "NexoLicense", lic.Name, "spec.licenseRef"); b != nil {
		b.reason = nexov1alpha1.ReasonLicenseNotReady
		if c := findReady(lic); c != nil && c.Status == metav1.ConditionFalse {
			b.reason, b.wait = c.Reason, false // Expired, SignatureInvalid, ...: needs a new license
		}
		return b, nil
	}
	if lic.Status.ExpiresAt != nil && !r.Now().Before(lic.Status.ExpiresAt.Time) {
		return &blocked{reason: nexov1alpha1.ReasonLicenseExpired, message: fmt.Sprintf("NexoLicense %s expired at %s", lic.Name, lic.Status.ExpiresAt.Format(time.RFC3339))}, nil
	}
	var missing []string
	for _, s := range res.graph.Steps {
		if !slices.Contains(lic.Status.Entitlements, s.Kind) && !slices.Contains(missing, s.Kind) {
			missing = append(missing, s.Kind)
		}
	}
	if len(missing) > 0 {
		return &blocked{reason: nexov1alpha1.ReasonMissingEntitlement, message: fmt.Sprintf("NexoLicense %s does not entitle %s; entitled: %s",
			lic.Name, strings.Join(missing, ", "), strings.Join(lic.Status.Entitlements, ", "))}, nil
	}
	ok, count, pos, err := r.slots.admitted(ctx, r.Client, proxy, types.NamespacedName{Namespace: proxy.Namespace, Name: lic.Name}, lic.Status.DocumentID, lic.Status.MaxProxies)
	if err != nil {
		return nil, err
	}
	if !ok {
		return &blocked{reason: nexov1alpha1.ReasonLicenseExhausted, message: fmt.Sprintf("NexoLicense %s covers %d proxies and %d use its license document (counted across every NexoLicense holding it, in any namespace); this proxy is number %d by creation time",
			lic.Name, lic.Status.MaxProxies, count, pos), wait: true}, nil
	}
	return nil, nil
}

func findReady(obj nexov1alpha1.Object) *metav1.Condition {
	_, c := readyAndCurrent(obj)
	return c
}
