package manager

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/nexo-io/nexo-edge/contract/scheme"
	"github.com/nexo-io/nexo-edge/contract/signature"
)

// Serving is how a Manager process serves its probes and metrics, reads its trusted keys and
// takes its Lease (New, Run).
type Serving struct {
	// TrustedKeysDir is the mounted trusted-keys Secret; every file holding an ed25519 public key
	// is trusted. It is read on every deploy: the kubelet updates the files when the Secret
	// changes, so a rotated or revoked key applies without a restart.
	TrustedKeysDir string
	// ProbeAddr serves /healthz and /readyz ("" or "0": none).
	ProbeAddr string
	// MetricsAddr serves /metrics ("" or "0": none): over HTTPS to callers the API server
	// authenticates and authorizes for GET /metrics (MetricsSecure), else plain HTTP.
	MetricsAddr    string
	MetricsSecure  bool
	MetricsCertDir string
	// LeaderElect holds the nexo-manager Lease so only one Manager applies commands.
	LeaderElect bool
}

// Manager is a Manager process: the Agent and what serves it.
type Manager struct {
	*Agent
	serving Serving
	rest    *rest.Config
}

// New builds a Manager process from cfg (cfg.RESTConfig is its identity): the clients, the
// Agent, and, unless cfg sets its own, trusted keys read from serving.TrustedKeysDir.
func New(cfg Config, serving Serving) (*Manager, error) {
	if cfg.RESTConfig == nil {
		return nil, errors.New("the Manager needs a REST config")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.TrustedKeys == nil {
		dir := serving.TrustedKeysDir
		cfg.TrustedKeys = func() (map[string]ed25519.PublicKey, error) { return ReadKeysDir(dir) }
	}
	c, err := client.New(cfg.RESTConfig, client.Options{Scheme: scheme.New()})
	if err != nil {
		return nil, fmt.Errorf("cannot build a client: %w", err)
	}
	d, err := discovery.NewDiscoveryClientForConfig(cfg.RESTConfig)
	if err != nil {
		return nil, fmt.Errorf("cannot build a discovery client: %w", err)
	}
	return &Manager{Agent: NewAgent(cfg, c, d), serving: serving, rest: cfg.RESTConfig}, nil
}

// Run serves the probes and metrics and runs the Agent (under the Lease with LeaderElect) until
// ctx ends.
func (m *Manager) Run(ctx context.Context) error {
	log := m.cfg.Log
	serveProbes(ctx, m.serving.ProbeAddr, m.Agent)
	if err := m.serveMetrics(ctx); err != nil {
		return err
	}
	keys, _ := ReadKeysDir(m.serving.TrustedKeysDir)
	log.Info("starting nexo-manager", "version", m.cfg.Version, "controlPlane", m.cfg.ControlPlaneURL, "trustedKeys", len(keys), "ownerId", m.OwnerID())
	if !m.serving.LeaderElect {
		_ = m.Agent.Run(ctx) // it returns when ctx ends
		return nil
	}
	cs, err := kubernetes.NewForConfig(m.rest)
	if err != nil {
		return fmt.Errorf("cannot build a clientset: %w", err)
	}
	host, _ := os.Hostname()
	RunElected(ctx, cs, m.cfg.Namespace, host+"-"+strconv.Itoa(os.Getpid()), DefaultLeaseTimings, log, func(ctx context.Context) { _ = m.Agent.Run(ctx) })
	return nil
}

// serveProbes serves /healthz (the process is up) and /readyz (Agent.Ready) on addr.
func serveProbes(ctx context.Context, addr string, a *Agent) {
	if addr == "" || addr == "0" {
		return
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := a.Ready(); err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { <-ctx.Done(); _ = srv.Shutdown(context.Background()) }()
	go func() { _ = srv.ListenAndServe() }()
}

// serveMetrics serves /metrics as the operator does: HTTPS, and only callers the API server
// authenticates (TokenReview) and allows GET on /metrics (SubjectAccessReview, MetricsAuth);
// plain HTTP only without MetricsSecure.
func (m *Manager) serveMetrics(ctx context.Context) error {
	if m.serving.MetricsAddr == "" || m.serving.MetricsAddr == "0" {
		return nil
	}
	opts := metricsserver.Options{BindAddress: m.serving.MetricsAddr, SecureServing: m.serving.MetricsSecure, CertDir: m.serving.MetricsCertDir}
	httpClient, err := rest.HTTPClientFor(m.rest)
	if err != nil {
		return fmt.Errorf("cannot build an HTTP client: %w", err)
	}
	if m.serving.MetricsSecure {
		cs, err := kubernetes.NewForConfigAndClient(m.rest, httpClient)
		if err != nil {
			return fmt.Errorf("cannot build a clientset: %w", err)
		}
		auth := &MetricsAuth{Client: cs}
		opts.FilterProvider = func(*rest.Config, *http.Client) (metricsserver.Filter, error) {
			return func(_ logr.Logger, h http.Handler) (http.Handler, error) { return auth.Wrap(h), nil }, nil
		}
	}
	srv, err := metricsserver.NewServer(opts, m.rest, httpClient)
	if err != nil {
		return fmt.Errorf("cannot build the metrics server: %w", err)
	}
	go func() {
		if err := srv.Start(ctx); err != nil {
			m.cfg.Log.Error(err, "metrics server stopped")
		}
	}()
	return nil
}

// ReadKeysDir reads every file of dir as an ed25519 public key; other files are skipped.
func ReadKeysDir(dir string) (map[string]ed25519.PublicKey, error) {
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
