package reliability_test

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/nexo-io/nexo-edge/test/framework/testcluster"
)

// TestThrottledAPIServer: with kube-apiserver limited to a few requests in flight (priority and
// fairness off, so the limit answers 429 Too Many Requests at once), the operator still converges
// the fleet, slower, without an error storm and without its work queue growing: requests the API
// server refused are retried by the client (Retry-After), not turned into failed reconciles.
func TestThrottledAPIServer(t *testing.T) {
	n := 200
	p := install(t, []string{"shop"}, n, testcluster.Options{APIServerFlags: map[string]string{
		"enable-priority-and-fairness":   "false",
		"max-requests-inflight":          "6",
		"max-mutating-requests-inflight": "3",
	}})
	p.createFleet(t, "shop", n)
	// Plain-HTTP metrics, scraped from loopback below.
	op := p.startOperator(t, "--metrics-secure=false", "--kube-api-qps=500", "--kube-api-burst=1000")
	start := time.Now()

	var mu sync.Mutex
	var depths []float64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if m, err := scrape(op.MetricsAddr); err == nil {
				mu.Lock()
				depths = append(depths, m["workqueue_depth{nexoproxies}"])
				mu.Unlock()
			}
			select {
			case <-stop:
				return
			case <-time.After(time.Second):
			}
		}
	}()
	p.settle(t, "shop", n, "", 15*time.Minute)
	took := time.Since(start)
	close(stop)
	<-sampled

	m, err := scrape(op.MetricsAddr)
	must(t, err)
	throttled := m["rest_client_requests_total{429}"]
	if throttled == 0 {
		t.Fatal("the API server refused no request with 429: the test did not throttle")
	}
	errorsLogged := strings.Count(op.Logs(), `"level":"error"`)
	reconcileErrors := m["controller_runtime_reconcile_errors_total{nexoproxies}"]
	if reconcileErrors > float64(n)/10 {
		t.Errorf("%.0f failed reconciles for %d proxies: an error storm", reconcileErrors, n)
	}
	peak, last := 0.0, 0.0
	for _, d := range depths {
		peak = max(peak, d)
		last = d
	}
	if final := m["workqueue_depth{nexoproxies}"]; final != 0 {
		t.Errorf("work queue depth %.0f after convergence, want 0", final)
	}
	t.Logf("queue depth samples: %v", depths)
	figure(t, "throttled API server (max-requests-inflight 6, mutating 3, no priority and fairness)",
		fmt.Sprintf("%d proxies converged in %s; %.0f requests refused with 429 and retried; %.0f failed reconciles, %d error log lines; queue depth peak %.0f, last sample %.0f", n, took.Round(100*time.Millisecond), throttled, reconcileErrors, errorsLogged, peak, last))
}

// scrape reads the operator's and the Manager's metrics that the suites look at: work queue
// depth and reconcile errors by controller, client requests by status code, commands the
// Manager applied; keyed "name{label}" (sums over other labels).
func scrape(addr string) (map[string]float64, error) {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			switch name {
			case "workqueue_depth":
				out[name+"{"+labels["name"]+"}"] += m.GetGauge().GetValue()
			case "controller_runtime_reconcile_errors_total":
				out[name+"{"+labels["controller"]+"}"] += m.GetCounter().GetValue()
			case "rest_client_requests_total":
				out[name+"{"+labels["code"]+"}"] += m.GetCounter().GetValue()
			case "nexo_manager_commands_total":
				out[name] += m.GetCounter().GetValue()
			}
		}
	}
	return out, nil
}
