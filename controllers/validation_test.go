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
