package controllers

import (
	"strings"
	"testing"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
)

// Objects stored before the CRD refused credentials in URLs are caught by the operator, with a
// message that never repeats the URL's secret.
func TestCredentialsInURLsAreRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		bad  *invalid
		want string
	}{
		{"tracing with user:password", validateTracing(&nexov1alpha1.NexoTracing{Spec: nexov1alpha1.NexoTracingSpec{Endpoint: "https://u:s3cret@otel:4318", Protocol: "http"}}), "headersSecretRef"},
		{"tracing with a token as user", validateTracing(&nexov1alpha1.NexoTracing{Spec: nexov1alpha1.NexoTracingSpec{Endpoint: "http://s3cret@otel:4317", Protocol: "grpc"}}), "headersSecretRef"},
		{"audit webhook", validateAuditLog(&nexov1alpha1.NexoAuditLog{Spec: nexov1alpha1.NexoAuditLogSpec{Sink: nexov1alpha1.AuditSink{Type: "Webhook", URL: "https://s3cret@audit/hook"}}}), "sink.authSecretRef"},
		{"clean tracing", validateTracing(&nexov1alpha1.NexoTracing{Spec: nexov1alpha1.NexoTracingSpec{Endpoint: "http://otel:4317", Protocol: "grpc"}}), ""},
		{"clean webhook", validateAuditLog(&nexov1alpha1.NexoAuditLog{Spec: nexov1alpha1.NexoAuditLogSpec{Sink: nexov1alpha1.AuditSink{Type: "Webhook", URL: "https://audit/hook?x=@"}}}), ""},
		{"stdout sink", validateAuditLog(&nexov1alpha1.NexoAuditLog{Spec: nexov1alpha1.NexoAuditLogSpec{Sink: nexov1alpha1.AuditSink{Type: "Stdout"}}}), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			switch {
			case tc.want == "" && tc.bad != nil:
				t.Errorf("refused: %s", tc.bad.message)
			case tc.want != "" && tc.bad == nil:
				t.Error("accepted")
			case tc.bad != nil && (tc.bad.reason != ReasonInvalidSpec || !strings.Contains(tc.bad.message, tc.want) || strings.Contains(tc.bad.message, "s3cret")):
				t.Errorf("%s: %s", tc.bad.reason, tc.bad.message)
			}
		})
	}
}

func TestPortConflict(t *testing.T) {
	for _, c := range []struct {
		name          string
		proxy, metric int32
		metrics       bool
		want          bool
	}{
		{"no NexoMetrics", 9216, 0, false, false},
		{"default proxy port", 0, 9216, true, false},
		{"other ports", 27018, 9216, true, false},
		{"same port", 9216, 9216, true, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := &nexov1alpha1.NexoProxy{Spec: nexov1alpha1.NexoProxySpec{Port: c.proxy}}
			var m *nexov1alpha1.NexoMetricsSpec
			if c.metrics {
				m = &nexov1alpha1.NexoMetricsSpec{Port: c.metric}
			}
			b := portConflict(p, m)
			if (b != nil) != c.want {
				t.Fatalf("portConflict = %+v, want conflict %v", b, c.want)
			}
			if b != nil && (b.reason != ReasonPortConflict || b.wait || !strings.Contains(b.message, "9216")) {
				t.Errorf("refusal %+v: want PortConflict, not waiting, naming the port", b)
			}
		})
	}
}
