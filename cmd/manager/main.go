// Command manager is the Nexo Manager: the in-cluster agent that connects outbound to the
// Control Plane (see package agent).
package main

import (
	"context"
	"crypto/ed25519"
	"flag"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/discovery"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/nexo-io/nexo-edge/agent"
	"github.com/nexo-io/nexo-edge/catalog"
	"github.com/nexo-io/nexo-edge/internal/operator"
	"github.com/nexo-io/nexo-edge/signature"
)

func main() {
	cfg := agent.Config{Version: catalog.BuildVersion}
	var keysDir, probeAddr, metricsAddr string
	flag.StringVar(&cfg.TokenFile, "token-file", "/var/run/nexo/connect-token/token", "connect token file (the mounted Secret; re-read on every heartbeat)")
	flag.StringVar(&cfg.ControlPlaneURL, "control-plane-url", "https://cp.nexo.io", "Control Plane URL")
	flag.StringVar(&cfg.Namespace, "namespace", envOr("POD_NAMESPACE", "nexo-system"), "namespace of the Manager's state and status ConfigMaps")
	flag.StringVar(&cfg.OwnerID, "owner-id", "nexo-manager", "value of the nexo.io/owner label on everything the Manager creates")
	flag.StringVar(&cfg.ProxyImage, "proxy-image", "", "configured proxy image, reported in heartbeats")
	flag.BoolVar(&cfg.AllowAdoption, "allow-adoption", false, "migration gate: adopt existing objects annotated nexo.io/adopt=true")
	flag.StringVar(&keysDir, "trusted-keys-dir", "/var/run/nexo/trusted-keys", "folder of Control Plane public keys (the mounted trusted-keys Secret)")
	flag.StringVar(&probeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	flag.StringVar(&metricsAddr, "metrics-bind-address", ":8080", "address of /metrics")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	log := ctrl.Log.WithName("manager")
	cfg.Log = log

	cfg.TrustedKeys = map[string]ed25519.PublicKey{}
	files, _ := filepath.Glob(filepath.Join(keysDir, "*"))
	for _, f := range files {
		if data, err := os.ReadFile(f); err == nil {
			if pub, err := signature.ParsePublicKey(data); err == nil {
				cfg.TrustedKeys[signature.KeyID(pub)] = pub
			}
		}
	}
	restConfig := ctrl.GetConfigOrDie()
	scheme := operator.Scheme()
	_ = apiextensionsv1.AddToScheme(scheme)
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
	a := agent.New(cfg, c, d)
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
	serve(ctx, metricsAddr, func(mux *http.ServeMux) {
		mux.Handle("/metrics", promhttp.HandlerFor(agent.Registry, promhttp.HandlerOpts{}))
	})
	log.Info("starting nexo-manager", "version", cfg.Version, "controlPlane", cfg.ControlPlaneURL, "trustedKeys", len(cfg.TrustedKeys))
	_ = a.Run(ctx)
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
