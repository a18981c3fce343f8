package manager

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

type metrics struct {
	lastHeartbeat prometheus.Gauge
	commands      *prometheus.CounterVec
	ackRetries    prometheus.Counter
	condition     *prometheus.GaugeVec
}

// setCondition sets a condition-style series pair: status="true" is 1 and status="false" 0
// when it holds, the other way round when not (as kube-state-metrics reports conditions).
func (m *metrics) setCondition(condition string, holds bool) {
	t, f := 0.0, 1.0
	if holds {
		t, f = 1, 0
	}
	m.condition.WithLabelValues(condition, "true").Set(t)
	m.condition.WithLabelValues(condition, "false").Set(f)
}

var (
	metricsOnce sync.Once
	shared      *metrics
	// Registry holds the Manager's metrics: controller-runtime's registry (with the Go runtime and
	// client-go metrics), which cmd/manager serves on /metrics through controller-runtime's
	// metrics server, authenticated and authorized like the operator's.
	Registry = ctrlmetrics.Registry
)

func newMetrics() *metrics {
	metricsOnce.Do(func() {
		shared = &metrics{
			lastHeartbeat: prometheus.NewGauge(prometheus.GaugeOpts{Name: "nexo_manager_last_heartbeat_timestamp_seconds",
				Help: "Unix time of the last successful heartbeat (heartbeat age = time() - this)."}),
			commands: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "nexo_manager_commands_total",
				Help: "Commands applied, by type and outcome."}, []string{"type", "status"}),
			ackRetries: prometheus.NewCounter(prometheus.CounterOpts{Name: "nexo_manager_ack_retries_total",
				Help: "Acknowledgement attempts retried."}),
			condition: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "nexo_manager_condition",
				Help: "The Manager's conditions, one series per status: Configured (it has a Control Plane URL, a connect token and the trusted-keys Secret)."}, []string{"condition", "status"}),
		}
		Registry.MustRegister(shared.lastHeartbeat, shared.commands, shared.ackRetries, shared.condition)
	})
	return shared
}
