package controllers

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

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
	"github.com/nexo-io/nexo-edge/controllers/render"
	"github.com/nexo-io/nexo-edge/controllers/slimcache"
)

// waitRequeue is how soon a proxy waiting for a reference is checked again.
const waitRequeue = 30 * time.Second

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
	// Informers gives the trimmed state of the children and Secrets (see SetupWithManager).
	Informers *slimcache.Registry

	secrets  secretUsers
	metrics  *proxyMetrics
	versions childVersions
	writes   ownWrites
	// What the children's informers keep (Secrets: every Secret), read from their own stores.
	children    childStores
	deployments slimcache.Store[*slimcache.DeploymentState]
	configMaps  slimcache.Store[*slimcache.ChildMeta]
	secretMeta  slimcache.Store[*slimcache.ChildMeta]
	slots       licenseSlots
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
	r.children = newChildStores(r.Informers, render.Children)
	// The kinds whose particular entries the controller reads: the workload's replica counts,
	// revisions to prune, pull-Secret copies to prune and every Secret's version.
	r.deployments = r.children.deployments[render.DeploymentChild.Kind()]
	r.configMaps = r.children.meta[render.ConfigMapChild.Kind()]
	r.secretMeta = r.children.meta[render.SecretChild.Kind()]
	b := ctrl.NewControllerManagedBy(mgr).
		Named("nexoproxies").
		WithOptions(controller.Options{MaxConcurrentReconciles: r.Workers}).
		For(&nexov1alpha1.NexoProxy{}, builder.WithPredicates(specOrSignatureChanged()))
	// Owns, on informers whose cache keeps only a slimcache entry per object.
	for _, k := range render.Children {
		b = b.WatchesRawSource(source.Kind(c, CacheObject(k), owner, childPredicate(k)))
	}
	b = b.
		// Any Secret may be referenced, not only the pull-Secret copies.
		WatchesRawSource(source.Kind(c, CacheObject(render.SecretChild), handler.EnqueueRequestsFromMapFunc(r.secrets.proxiesFor))).
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

// Reconcile runs the phases over one scope, computes the status from it once, and writes it
// only if it changed.
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
	if err := r.awaitOwnWrite(ctx, req.NamespacedName, proxy); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !proxy.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil // owner references let garbage collection remove the children
	}
	before := proxy.DeepCopy()
	s := &proxyScope{proxy: proxy, key: req.NamespacedName, passed: map[string]string{}}
	if dep, ok := r.deployments.Get(req.NamespacedName); ok && metav1.IsControlledBy(dep, proxy) {
		s.running = dep
	}
	err := r.runPhases(ctx, s)
	var ae *applyError
	if err != nil && !errors.As(err, &ae) {
		return ctrl.Result{}, err // a read failed: retried with backoff, status untouched
	}
	s.applyErr = err
	proxyStatus(s)
	if s.blocked != nil {
		logf.FromContext(ctx).V(1).Info("proxy blocked", "phase", s.blockedAt, "reason", s.blocked.reason, "message", s.blocked.message)
		r.metrics.failure(s.blocked.reason)
	}
	if err == nil {
		proxy.Status.ObservedGeneration = proxy.Generation
		r.metrics.observe(req.NamespacedName, proxy.Status.Phase)
	}
	if werr := writeStatus(ctx, r.Client, before, proxy); werr != nil {
		if err != nil {
			logf.FromContext(ctx).Error(werr, "cannot record the apply failure")
			return ctrl.Result{}, err
		}
		return statusConflict(ctx, werr)
	}
	if proxy.ResourceVersion != before.ResourceVersion {
		r.writes.wrote(req.NamespacedName, before.ResourceVersion, time.Now())
	}
	r.recordTransitions(before, proxy)
	if err != nil {
		// The failure is on status for people; the error makes controller-runtime back off.
		return ctrl.Result{}, err
	}
	if s.blocked != nil && s.blocked.wait {
		return ctrl.Result{RequeueAfter: waitRequeue}, nil
	}
	return ctrl.Result{}, nil
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
	_, c := nexov1alpha1.ReadyAndCurrent(obj)
	return c
}
