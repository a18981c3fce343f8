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
		}
		Registry.MustRegister(shared.lastHeartbeat, shared.commands, shared.ackRetries)
	})
	return shared
}
