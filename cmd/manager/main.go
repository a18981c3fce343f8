// Command manager is the Nexo Manager: the in-cluster agent that connects outbound to the
// Control Plane (see package manager). It reads flags, builds the Manager and runs it.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	// The images carry no CA bundle (docs/release.md): the Manager verifies the Control Plane's
	// certificate against these roots when the system has none.
	_ "golang.org/x/crypto/x509roots/fallback"

	"github.com/nexo-io/nexo-edge/catalog"
	"github.com/nexo-io/nexo-edge/contract/buildinfo"
	"github.com/nexo-io/nexo-edge/contract/protocol"
	"github.com/nexo-io/nexo-edge/contract/wire"
	"github.com/nexo-io/nexo-edge/manager"
)

func main() {
	cfg := manager.Config{Version: buildinfo.String()}
	var serving manager.Serving
	flag.StringVar(&cfg.TokenFile, "token-file", "/var/run/nexo/connect-token/token", "connect token file (the mounted Secret; re-read on every heartbeat)")
	flag.StringVar(&cfg.ControlPlaneURL, "control-plane-url", os.Getenv("NEXO_CONTROL_PLANE_URL"), "Control Plane URL, from the Control Plane's install command (default $NEXO_CONTROL_PLANE_URL; unset, the Manager waits, Ready and reporting itself not configured, for controlPlaneURL in the ConfigMap nexo-manager-config)")
	flag.StringVar(&cfg.Namespace, "namespace", envOr("POD_NAMESPACE", "nexo-system"), "namespace of the Manager's state and status ConfigMaps")
	flag.StringVar(&cfg.OwnerID, "owner-id", os.Getenv("NEXO_OWNER_ID"), "value of the nexo.io/owner label on everything the Manager creates (unique per installation; default $NEXO_OWNER_ID, else env-<environment id of the connect token>)")
	flag.BoolVar(&serving.LeaderElect, "leader-elect", true, "hold the nexo-manager Lease so only one Manager applies commands")
	flag.StringVar(&cfg.ProxyImage, "proxy-image", envOr("NEXO_PROXY_IMAGE", catalog.DefaultProxyImage), "configured proxy image, reported in heartbeats (default $NEXO_PROXY_IMAGE, else the image released with this build)")
	flag.BoolVar(&cfg.AllowAdoption, "allow-adoption", false, "migration gate: adopt existing objects annotated nexo.io/adopt=true")
	flag.StringVar(&cfg.TrustedKeysSecret, "trusted-keys-secret", wire.TrustedKeysSecret, "Secret in --namespace the Manager keeps equal to the Control Plane's advertised signing keys (its control-plane-* entries); empty disables")
	var watch, deployNamespaces, imageRepositories string
	flag.StringVar(&deployNamespaces, "deploy-namespaces", os.Getenv("NEXO_DEPLOY_NAMESPACES"), "the cluster's deploy limit: comma-separated namespaces the Manager may deploy into, roll out in and delete from (\"*\": all); empty: none (default $NEXO_DEPLOY_NAMESPACES)")
	flag.StringVar(&imageRepositories, "allowed-image-repositories", os.Getenv("NEXO_ALLOWED_IMAGE_REPOSITORIES"), "the cluster's image limit: comma-separated image repositories a rollout or a deployed proxyImage may name (\"*\": any); empty: none (default $NEXO_ALLOWED_IMAGE_REPOSITORIES)")
	flag.StringVar(&watch, "watch-namespaces", os.Getenv(wire.WatchNamespacesEnv), "comma-separated namespaces the Manager lists its proxies in and deploys into (OLM sets WATCH_NAMESPACES from the OperatorGroup's target namespaces); empty: all")
	flag.StringVar(&serving.TrustedKeysDir, "trusted-keys-dir", "/var/run/nexo/trusted-keys", "folder of Control Plane public keys (the mounted trusted-keys Secret)")
	flag.StringVar(&serving.ProbeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz")
	flag.StringVar(&serving.MetricsAddr, "metrics-bind-address", ":8443", "address of /metrics; 0 disables it")
	flag.BoolVar(&serving.MetricsSecure, "metrics-secure", true, "serve /metrics over HTTPS to callers the API server authenticates and authorizes for GET /metrics; false: plain HTTP to anyone")
	flag.StringVar(&serving.MetricsCertDir, "metrics-cert-dir", "", "folder with tls.crt and tls.key for the metrics server (default: a self-signed certificate)")
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
	cfg.Log = ctrl.Log.WithName("manager")
	if err := cfg.Validate(); err != nil {
		cfg.Log.Error(err, "invalid configuration")
		os.Exit(2)
	}
	cfg.RESTConfig = ctrl.GetConfigOrDie()
	m, err := manager.New(cfg, serving)
	if err != nil {
		cfg.Log.Error(err, "cannot build the Manager")
		os.Exit(1)
	}
	if err := m.Run(ctrl.SetupSignalHandler()); err != nil {
		cfg.Log.Error(err, "the Manager stopped")
		os.Exit(1)
	}
}

func envOr(k, def string) string {
	if v := strings.TrimSpace(os.Getenv(k)); v != "" {
		return v
	}
	return def
}
