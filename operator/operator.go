// Package operator builds the nexo-operator's controller-runtime manager from its
// configuration. cmd/operator only parses flags; tests and benchmarks start the same manager.
package operator

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/contract/license"
	"github.com/nexo-io/nexo-edge/contract/protocol"
	"github.com/nexo-io/nexo-edge/contract/scheme"
	"github.com/nexo-io/nexo-edge/contract/signature"
	"github.com/nexo-io/nexo-edge/contract/wire"
	"github.com/nexo-io/nexo-edge/controllers"
	"github.com/nexo-io/nexo-edge/controllers/render"
	"github.com/nexo-io/nexo-edge/controllers/slimcache"
)

// Config is the operator's configuration (one field per flag).
type Config struct {
	MetricsAddr string
	// MetricsSecure serves metrics over HTTPS (a self-signed certificate unless MetricsCertDir
	// has tls.crt and tls.key) to callers the API server authenticates (TokenReview) and
	// authorizes for GET /metrics (SubjectAccessReview), as kubebuilder scaffolds it.
	MetricsSecure  bool
	MetricsCertDir string
	ProbeAddr      string
	// PprofAddr serves net/http/pprof when set (for profiling; off by default).
	PprofAddr         string
	LeaderElect       bool
	OperatorNamespace string
	// WatchNamespaces limits reconciliation; empty means all namespaces.
	WatchNamespaces   []string
	RequireSignatures bool
	TrustedKeysSecret string
	// LicenseKeyFiles add trusted license-signing public keys to the ones shipped in the build.
	LicenseKeyFiles []string
	// SkipNameValidation lets several operators run in one process (tests and benchmarks that
	// restart the operator); controller-runtime otherwise refuses repeated controller names.
	SkipNameValidation bool
	// ProxyWorkers is how many NexoProxies reconcile concurrently (default 4).
	ProxyWorkers int
	// EnvironmentID is this installation's Control Plane environment: the audience every
	// managed-resource signature must name. Without it, no signed object is accepted.
	EnvironmentID string
	// EnsureAdmissionPolicy makes the operator apply the managed-objects admission policy
	// (config/admission) at start, for installs that cannot ship it themselves (OLM).
	EnsureAdmissionPolicy bool
	// ManagerLimits are the Manager's limits (the cluster admin's, as the Manager is given them)
	// that EnsureAdmissionPolicy writes into the installation's deploy-limit binding. Empty
	// allows nothing.
	ManagerLimits protocol.Limits
}

// readiness is the operator's /readyz: ready only once the informer caches have synced and while
// the API server answers. An operator that cannot see its objects, or cannot write what it
// decides, is not ready, whatever its process does.
func readiness(mgr ctrl.Manager, restConfig *rest.Config) (healthz.Checker, error) {
	probeConfig := rest.CopyConfig(restConfig)
	probeConfig.Timeout = 2 * time.Second
	dc, err := discovery.NewDiscoveryClientForConfig(probeConfig)
	if err != nil {
		return nil, err
	}
	return func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), 2*time.Second)
		defer cancel()
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return errors.New("the informer caches have not synced yet")
		}
		if _, err := dc.ServerVersion(); err != nil {
			return fmt.Errorf("the API server does not answer: %w", err)
		}
		return nil
	}, nil
}

// metricsOptions: plain HTTP only when asked for (--metrics-secure=false).
func metricsOptions(cfg Config) metricsserver.Options {
	o := metricsserver.Options{BindAddress: cfg.MetricsAddr}
	if cfg.MetricsSecure {
		o.SecureServing, o.CertDir = true, cfg.MetricsCertDir
		o.FilterProvider = filters.WithAuthenticationAndAuthorization
	}
	return o
}

// New builds the manager: scoped caches, trusted keys loaded before any controller starts (so a
// restart does not flap signature verdicts), the catalog's reconciled kinds registered, health
// checks added. It returns the registered kinds too.
func New(ctx context.Context, restConfig *rest.Config, cfg Config) (ctrl.Manager, []string, error) {
	licenseKeys := license.ShippedKeys()
	for _, f := range cfg.LicenseKeyFiles {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, nil, fmt.Errorf("read license public key: %w", err)
		}
		pub, err := signature.ParsePublicKey(data)
		if err != nil {
			return nil, nil, fmt.Errorf("license public key %s: %w", f, err)
		}
		licenseKeys[signature.KeyID(pub)] = pub
	}

	// The children (controllers/render.Children) are cached only when they carry the operator's
	// label, and trimmed to the fields the controllers read (controllers/slimcache): ConfigMaps,
	// Services and Secrets as metadata, Deployments without their pod template. Secrets are
	// cached whoever made them (proxies reference them), as metadata only (their content is read
	// on demand), so unrelated objects cost no memory beyond their names.
	ours := labels.SelectorFromSet(labels.Set{render.ManagedByLabel: render.ManagedByValue})
	// managedFields are never read by the operator and are a large part of every cached object.
	// A read of a kind no controller watches fails instead of starting an unscoped informer.
	// Every informer is created through the registry, so the controllers read the trimmed
	// entries from the informers' own stores.
	sch := scheme.New()
	informers := &slimcache.Registry{Scheme: sch}
	cacheOpts := cache.Options{DefaultTransform: cache.TransformStripManagedFields(), ReaderFailOnMissingInformer: true, NewInformer: informers.NewInformer}
	var everything map[string]cache.Config // all namespaces
	if len(cfg.WatchNamespaces) > 0 {
		cacheOpts.DefaultNamespaces = map[string]cache.Config{}
		everything = map[string]cache.Config{cfg.OperatorNamespace: {}}
		for _, ns := range cfg.WatchNamespaces {
			cacheOpts.DefaultNamespaces[ns] = cache.Config{}
			everything[ns] = cache.Config{}
		}
	}
	cacheOpts.ByObject = controllers.ChildCaches(render.Children, ours, everything)
	cacheOpts.ByObject[&nexov1alpha1.NexoProxy{}] = cache.ByObject{Transform: slimcache.TrimProxy}

	// The operator talks to its own cluster's API server: gzip would cost CPU on both ends of
	// every list and watch, and each watch stream would hold a decompressor (about 40 KB).
	restConfig = rest.CopyConfig(restConfig)
	restConfig.DisableCompression = true
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme:                  sch,
		Cache:                   cacheOpts,
		Metrics:                 metricsOptions(cfg),
		HealthProbeBindAddress:  cfg.ProbeAddr,
		PprofBindAddress:        cfg.PprofAddr,
		MapperProvider:          newRESTMapper,
		LeaderElection:          cfg.LeaderElect,
		LeaderElectionID:        wire.OperatorLeaderElectionID,
		LeaderElectionNamespace: cfg.OperatorNamespace,
		Controller:              ctrlconfig.Controller{SkipNameValidation: &cfg.SkipNameValidation},
	})
	if err != nil {
		return nil, nil, err
	}
	keys := &controllers.TrustedKeys{Secret: types.NamespacedName{Namespace: cfg.OperatorNamespace, Name: cfg.TrustedKeysSecret}, Audience: cfg.EnvironmentID,
		AudienceFrom: types.NamespacedName{Namespace: cfg.OperatorNamespace, Name: wire.InstallConfigMap}}
	if _, err := keys.Load(ctx, mgr.GetAPIReader()); err != nil {
		return nil, nil, fmt.Errorf("load trusted keys from Secret %s: %w", keys.Secret, err)
	}
	if _, err := keys.LoadAudience(ctx, mgr.GetAPIReader()); err != nil {
		return nil, nil, fmt.Errorf("read the environment id from ConfigMap %s (or set --environment-id): %w", keys.AudienceFrom, err)
	}
	registered, err := controllers.Setup(ctx, mgr, controllers.Options{
		OperatorNamespace: cfg.OperatorNamespace,
		Keys:              keys,
		RequireSignatures: cfg.RequireSignatures,
		LicenseKeys:       licenseKeys,
		ProxyWorkers:      cfg.ProxyWorkers,
		Informers:         informers,
	})
	if err != nil {
		return nil, nil, err
	}
	if cfg.EnsureAdmissionPolicy {
		direct, err := client.New(restConfig, client.Options{Scheme: mgr.GetScheme()})
		if err != nil {
			return nil, nil, err
		}
		if err := mgr.Add(admissionPolicyApplier(direct, cfg.OperatorNamespace, cfg.WatchNamespaces, cfg.ManagerLimits)); err != nil {
			return nil, nil, err
		}
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return nil, nil, err
	}
	ready, err := readiness(mgr, restConfig)
	if err != nil {
		return nil, nil, err
	}
	if err := mgr.AddReadyzCheck("caches-and-api", ready); err != nil {
		return nil, nil, err
	}
	return mgr, registered, nil
}
