package controllers

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
)

// proxyMetrics are the operator's own metrics; reconcile counts and durations come from
// controller-runtime.
type proxyMetrics struct {
	mu       sync.Mutex
	phases   map[types.NamespacedName]nexov1alpha1.ProxyPhase
	byPhase  *prometheus.GaugeVec
	failures *prometheus.CounterVec
}

var (
	registerOnce   sync.Once
	proxiesByPhase = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "nexo_proxies", Help: "NexoProxies by phase.",
	}, []string{"phase"})
	resolutionFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "nexo_graph_resolution_failures_total", Help: "NexoProxy reconciles blocked before the workload, by reason.",
	}, []string{"reason"})
)

func newProxyMetrics() *proxyMetrics {
	registerOnce.Do(func() { metrics.Registry.MustRegister(proxiesByPhase, resolutionFailures) })
	return &proxyMetrics{phases: map[types.NamespacedName]nexov1alpha1.ProxyPhase{}, byPhase: proxiesByPhase, failures: resolutionFailures}
}

func (m *proxyMetrics) observe(key types.NamespacedName, phase nexov1alpha1.ProxyPhase) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.phases[key]; ok {
		if old == phase {
			return
		}
		m.byPhase.WithLabelValues(string(old)).Dec()
	}
	m.phases[key] = phase
	m.byPhase.WithLabelValues(string(phase)).Inc()
}

func (m *proxyMetrics) forget(key types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.phases[key]; ok {
		m.byPhase.WithLabelValues(string(old)).Dec()
		delete(m.phases, key)
	}
}

func (m *proxyMetrics) failure(reason string) { m.failures.WithLabelValues(reason).Inc() }
