// Command manager is the Nexo Manager: the in-cluster agent that connects outbound to the
// Control Plane (see package manager).
package main

import (
	"context"
	"crypto/ed25519"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/nexo-io/nexo-edge/catalog"
	// The images carry no CA bundle (docs/release.md): the Manager verifies the Control Plane's
	// certificate against these roots when the system has none.
	_ "golang.org/x/crypto/x509roots/fallback"

	"github.com/nexo-io/nexo-edge/contract/buildinfo"
	"github.com/nexo-io/nexo-edge/contract/protocol"
	"github.com/nexo-io/nexo-edge/contract/scheme"
	"github.com/nexo-io/nexo-edge/contract/signature"
	"github.com/nexo-io/nexo-edge/contract/wire"
	"github.com/nexo-io/nexo-edge/manager"
)

func main() {
	cfg := manager.Config{Version: buildinfo.String()}
	var keysDir, probeAddr, metricsAddr string
	flag.StringVar(&cfg.TokenFile, "token-file", "/var/run/nexo/connect-token/token", "connect token file (the mounted Secret; re-read on every heartbeat)")
	flag.StringVar(&cfg.ControlPlaneURL, "control-plane-url", os.Getenv("NEXO_CONTROL_PLANE_URL"), "Control Plane URL, from the Control Plane's install command (default $NEXO_CONTROL_PLANE_URL; unset, the Manager waits, not Ready, for controlPlaneURL in the ConfigMap nexo-manager-config)")
	flag.StringVar(&cfg.Namespace, "namespace", envOr("POD_NAMESPACE", "nexo-system"), "namespace of the Manager's state and status ConfigMaps")
	flag.StringVar(&cfg.OwnerID, "owner-id", os.Getenv("NEXO_OWNER_ID"), "value of the nexo.io/owner label on everything the Manager creates (unique per installation; default $NEXO_OWNER_ID, else env-<environment id of the connect token>)")
	var leaderElect bool
	flag.BoolVar(&leaderElect, "leader-elect", true, "hold the nexo-manager Lease so only one Manager applies commands")
	flag.StringVar(&cfg.ProxyImage, "proxy-image", envOr("NEXO_PROXY_IMAGE", catalog.DefaultProxyImage), "configured proxy image, reported in heartbeats (default $NEXO_PROXY_IMAGE, else the image released with this build)")
	flag.BoolVar(&cfg.AllowAdoption, "allow-adoption", false, "migration gate: adopt existing objects annotated nexo.io/adopt=true")
	flag.StringVar(&cfg.TrustedKeysSecret, "trusted-keys-secret", wire.TrustedKeysSecret, "Secret in --namespace the Manager keeps equal to the Control Plane's advertised signing keys (its control-plane-* entries); empty disables")
	var watch, deployNamespaces, imageRepositories string
	flag.StringVar(&deployNamespaces, "deploy-namespaces", os.Getenv("NEXO_DEPLOY_NAMESPACES"), "the cluster's deploy limit: comma-separated namespaces the Manager may deploy into, roll out in and delete from (\"*\": all); empty: none (default $NEXO_DEPLOY_NAMESPACES)")
	flag.StringVar(&imageRepositories, "allowed-image-repositories", os.Getenv("NEXO_ALLOWED_IMAGE_REPOSITORIES"), "the cluster's image limit: comma-separated image repositories a rollout or a deployed proxyImage may name (\"*\": any); empty: none (default $NEXO_ALLOWED_IMAGE_REPOSITORIES)")
	flag.StringVar(&watch, "watch-namespaces", os.Getenv(wire.WatchNamespacesEnv), "comma-separated namespaces the Manager lists its proxies in and deploys into (OLM sets WATCH_NAMESPACES from the OperatorGroup's target namespaces); empty: all")
	flag.StringVar(&keysDir, "trusted-keys-dir", "/var/run/nexo/trusted-keys", "folder of Control Plane public keys (the mounted trusted-keys Secret)")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8443", "address of /metrics; 0 disables it")
	var metricsSecure bool
	var metricsCertDir string
	flag.BoolVar(&metricsSecure, "metrics-secure", true, "serve /metrics over HTTPS to callers the API server authenticates and authorizes for GET /metrics; false: plain HTTP to anyone")
	flag.StringVar(&metricsCertDir, "metrics-cert-dir", "", "folder with tls.crt and tls.key for the metrics server (default: a self-signed certificate)")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	version := flag.Bool("version", false, "print the version and exit")
	flag.Parse()
	if *version {
		fmt.Println("nexo-manager", buildinfo.String())
		return
	}
	cfg.WatchNamespaces = wire.SplitNamespaces(watch)
	cfg.Limits = protocol.Limits{Namespaces: wire.SplitNamespaces(deployNamespaces), ImageRepositories: wire.SplitNamespaces(imageRepositories)}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	log := ctrl.Log.WithName("manager")
	if err := cfg.Validate(); err != nil {
		log.Error(err, "invalid configuration")
		os.Exit(2)
	}
	cfg.Log = log

	// The mounted trusted-keys Secret is read on every deploy: the kubelet updates the files when
	// the Secret changes, so a rotated or revoked key applies without a restart.
	cfg.TrustedKeys = func() (map[string]ed25519.PublicKey, error) { return readKeysDir(keysDir) }
	restConfig := ctrl.GetConfigOrDie()
	scheme := scheme.New()
	c, err := client.New(restConfig, client.Options{Scheme: scheme})
	if err != nil {
		log.Error(err, "cannot build a client")
		os.Exit(1)
	}
	d, err := discovery.NewDiscoveryClientForConfig(restConfig)
	if err != nil {
		log.Error(err, "cannot build a discovery client")
		os.Exit(1)
	}
	cfg.RESTConfig = restConfig
	a := manager.New(cfg, c, d)
	ctx := ctrl.SetupSignalHandler()
	serve(ctx, probeAddr, func(mux *http.ServeMux) {
		mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
		mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
			if err := a.Ready(); err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
			_, _ = w.Write([]byte("ok"))
		})
	})
	if metricsAddr != "" && metricsAddr != "0" {
		// As the operator's: HTTPS, and only callers the API server authenticates (TokenReview)
		// and allows GET on /metrics (SubjectAccessReview); plain HTTP only with --metrics-secure=false.
		opts := metricsserver.Options{BindAddress: metricsAddr, SecureServing: metricsSecure, CertDir: metricsCertDir}
		httpClient, err := rest.HTTPClientFor(restConfig)
		if err != nil {
			log.Error(err, "cannot build an HTTP client")
			os.Exit(1)
		}
		if metricsSecure {
			cs, err := kubernetes.NewForConfigAndClient(restConfig, httpClient)
			if err != nil {
				log.Error(err, "cannot build a clientset")
				os.Exit(1)
			}
			auth := &manager.MetricsAuth{Client: cs}
			opts.FilterProvider = func(*rest.Config, *http.Client) (metricsserver.Filter, error) {
				return func(_ logr.Logger, h http.Handler) (http.Handler, error) { return auth.Wrap(h), nil }, nil
			}
		}
		srv, err := metricsserver.NewServer(opts, restConfig, httpClient)
		if err != nil {
			log.Error(err, "cannot build the metrics server")
			os.Exit(1)
		}
		go func() {
			if err := srv.Start(ctx); err != nil {
				log.Error(err, "metrics server stopped")
			}
		}()
	}
	keys, _ := readKeysDir(keysDir)
	log.Info("starting nexo-manager", "version", cfg.Version, "controlPlane", cfg.ControlPlaneURL, "trustedKeys", len(keys), "ownerId", a.OwnerID())
	if !leaderElect {
		_ = a.Run(ctx)
		return
	}
	cs, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		log.Error(err, "cannot build a clientset")
		os.Exit(1)
	}
	host, _ := os.Hostname()
	manager.RunElected(ctx, cs, cfg.Namespace, host+"-"+strconv.Itoa(os.Getpid()), manager.DefaultLeaseTimings, log, func(ctx context.Context) { _ = a.Run(ctx) })
}

// readKeysDir reads every file of dir as an ed25519 public key; other files are skipped.
func readKeysDir(dir string) (map[string]ed25519.PublicKey, error) {
	keys := map[string]ed25519.PublicKey{}
	files, err := filepath.Glob(filepath.Join(dir, "*"))
	if err != nil {
		return nil, err
	}
	for _, f := range files {
		if data, err := os.ReadFile(f); err == nil {
			if pub, err := signature.ParsePublicKey(data); err == nil {
				keys[signature.KeyID(pub)] = pub
			}
		}
	}
	return keys, nil
}

func serve(ctx context.Context, addr string, routes func(*http.ServeMux)) {
	if addr == "" || addr == "0" {
		return
	}
	mux := http.NewServeMux()
	routes(mux)
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { <-ctx.Done(); _ = srv.Shutdown(context.Background()) }()
	go func() { _ = srv.ListenAndServe() }()
}

func envOr(k, def string) string {
	if v := strings.TrimSpace(os.Getenv(k)); v != "" {
		return v
	}
	return def
}
