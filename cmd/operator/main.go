// Command operator is the nexo-operator: it reconciles the nexo.io kinds this build supports.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"strings"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/nexo-io/nexo-edge/contract/buildinfo"
	"github.com/nexo-io/nexo-edge/contract/protocol"
	"github.com/nexo-io/nexo-edge/contract/wire"
	"github.com/nexo-io/nexo-edge/operator"
)

func main() {
	var cfg operator.Config
	var watch, licenseKeys string
	flag.StringVar(&cfg.MetricsAddr, "metrics-bind-address", ":8443", "address of the Prometheus metrics endpoint; 0 disables it")
	flag.BoolVar(&cfg.MetricsSecure, "metrics-secure", true, "serve metrics over HTTPS to callers authenticated and authorized by the API server (GET /metrics); false serves plain HTTP to anyone")
	flag.StringVar(&cfg.MetricsCertDir, "metrics-cert-dir", "", "folder with tls.crt and tls.key for the metrics server (default: a self-signed certificate)")
	flag.StringVar(&cfg.ProbeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	flag.StringVar(&cfg.PprofAddr, "pprof-bind-address", "", "address of net/http/pprof for profiling; empty disables it")
	flag.BoolVar(&cfg.LeaderElect, "leader-elect", false, "elect a leader so several replicas can run")
	// OLM passes its OperatorGroup's target namespaces through WATCH_NAMESPACES.
	flag.StringVar(&watch, "watch-namespaces", os.Getenv(wire.WatchNamespacesEnv), "comma-separated namespaces to reconcile; empty means all (default $WATCH_NAMESPACES)")
	flag.BoolVar(&cfg.RequireSignatures, "require-signatures", false, "refuse every Nexo object that is not signed by a trusted key")
	flag.StringVar(&cfg.TrustedKeysSecret, "trusted-keys-secret", wire.TrustedKeysSecret, "Secret in the operator namespace holding trusted signing public keys")
	flag.StringVar(&cfg.OperatorNamespace, "operator-namespace", envOr("POD_NAMESPACE", "nexo-system"), "namespace of the operator (trusted keys, pull secrets, leader lease)")
	flag.StringVar(&cfg.EnvironmentID, "environment-id", os.Getenv("NEXO_ENVIRONMENT_ID"), "Control Plane environment id of this installation: signed objects must be signed for it (default $NEXO_ENVIRONMENT_ID; nexoctl install sets it from the connect token)")
	flag.BoolVar(&cfg.EnsureAdmissionPolicy, "ensure-admission-policy", false, "apply the managed-objects ValidatingAdmissionPolicy at start (set by the OLM bundle, which cannot ship the policy; Helm and kustomize install it themselves)")
	// OLM's Subscription config.env sets the same variables on the Manager and the operator.
	var deployNamespaces, imageRepositories string
	flag.StringVar(&deployNamespaces, "manager-deploy-namespaces", os.Getenv("NEXO_DEPLOY_NAMESPACES"), "with --ensure-admission-policy: the Manager's deploy limit written into its admission binding, comma-separated namespaces (\"*\": all); empty: none (default $NEXO_DEPLOY_NAMESPACES)")
	flag.StringVar(&imageRepositories, "manager-image-repositories", os.Getenv("NEXO_ALLOWED_IMAGE_REPOSITORIES"), "with --ensure-admission-policy: the image repositories the Manager may set, written into its admission binding (\"*\": any); empty: none (default $NEXO_ALLOWED_IMAGE_REPOSITORIES)")
	flag.StringVar(&licenseKeys, "license-public-key", "", "comma-separated PEM files of extra license-signing public keys (the build ships its own)")
	var qps float64
	var burst int
	flag.IntVar(&cfg.ProxyWorkers, "proxy-workers", 4, "NexoProxies reconciled concurrently")
	flag.Float64Var(&qps, "kube-api-qps", 50, "client-side limit of API requests per second")
	flag.IntVar(&burst, "kube-api-burst", 100, "client-side burst of API requests")
	gcPercent := flag.Int("gc-percent", defaultGCPercent, "garbage collector target: heap growth in percent of the live heap before a collection (GOGC); the GOGC environment variable, when set, wins over this default")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine) // --zap-log-level, --zap-encoder, ...
	version := flag.Bool("version", false, "print the version and exit")
	flag.Parse()
	if *version {
		fmt.Println("nexo-operator", buildinfo.String())
		return
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	setGCPercent(*gcPercent)
	cfg.WatchNamespaces = wire.SplitNamespaces(watch)
	cfg.LicenseKeyFiles = splitList(licenseKeys)
	cfg.ManagerLimits = protocol.Limits{Namespaces: wire.SplitNamespaces(deployNamespaces), ImageRepositories: wire.SplitNamespaces(imageRepositories)}

	log := ctrl.Log.WithName("setup")
	ctx := ctrl.SetupSignalHandler()
	restConfig := ctrl.GetConfigOrDie()
	restConfig.QPS, restConfig.Burst = float32(qps), burst
	mgr, kinds, err := operator.New(ctx, restConfig, cfg)
	if err != nil {
		log.Error(err, "cannot build the operator")
		os.Exit(1)
	}
	log.Info("starting nexo-operator", "version", buildinfo.String(), "reconciledKinds", len(kinds), "watchNamespaces", cfg.WatchNamespaces)
	if err := mgr.Start(ctx); err != nil {
		log.Error(err, "operator stopped")
		os.Exit(1)
	}
}

// defaultGCPercent: the operator's live heap is mostly its caches, one entry per proxy and per
// child; Go's default (100) lets the heap grow to twice that before collecting. At 30 the peak is
// 1.3 times the live heap, which keeps the RSS an added proxy costs under 10 KB at N=1000; the
// collections cost about 5% more operator CPU than at 50 while many proxies reconcile at once,
// and nothing once converged (docs/operator.md, make bench).
const defaultGCPercent = 30

// setGCPercent applies --gc-percent when given, else GOGC when set, else the default.
func setGCPercent(v int) {
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "gc-percent" })
	if explicit || os.Getenv("GOGC") == "" {
		debug.SetGCPercent(v)
	}
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
