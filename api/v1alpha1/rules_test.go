package v1alpha1_test

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/catalog"
)

// Every Go-side rule of every kind (api/v1alpha1/<kind>_funcs.go): what it refuses, with which
// reason and which words, and what it accepts.
func TestValidate(t *testing.T) {
	ref := func(kind, name string) nexov1alpha1.RequestStepRef {
		return nexov1alpha1.RequestStepRef{Kind: kind, Name: name}
	}
	target := func(name, addr string) nexov1alpha1.WeightedTarget {
		return nexov1alpha1.WeightedTarget{Target: nexov1alpha1.Target{Name: name, Address: nexov1alpha1.Address(addr)}, Weight: 50}
	}
	for _, tc := range []struct {
		name   string
		obj    nexov1alpha1.Validator
		reason string   // "" = valid
		words  []string // the message names these
		never  string   // the message never repeats this
	}{
		{name: "pipeline of reconciled kinds", obj: &nexov1alpha1.NexoPipeline{Spec: nexov1alpha1.NexoPipelineSpec{
			Router: &nexov1alpha1.RouterRef{Kind: "NexoRouter", Name: "r"}, Request: []nexov1alpha1.RequestStepRef{ref("NexoRateLimit", "rl")}}}},
		{name: "pipeline with a schema-only step", obj: &nexov1alpha1.NexoPipeline{Spec: nexov1alpha1.NexoPipelineSpec{
			Request: []nexov1alpha1.RequestStepRef{ref("NexoRateLimit", "rl"), ref("NexoQueryGuard", "g")}}},
			reason: nexov1alpha1.ReasonUnsupportedReference, words: []string{"spec.request[1].kind", "NexoQueryGuard", "schema only"}},
		{name: "pipeline with a kind in the wrong slot", obj: &nexov1alpha1.NexoPipeline{Spec: nexov1alpha1.NexoPipelineSpec{
			Request: []nexov1alpha1.RequestStepRef{ref("NexoPIIMasking", "m")}}},
			reason: nexov1alpha1.ReasonInvalidReference, words: []string{"spec.request[0].kind", "NexoPIIMasking", "NexoRateLimit"}},
		{name: "an invalid reference outranks an unsupported one", obj: &nexov1alpha1.NexoPipeline{Spec: nexov1alpha1.NexoPipelineSpec{
			Request: []nexov1alpha1.RequestStepRef{ref("NexoQueryGuard", "g"), ref("NexoNothing", "x")}}},
			reason: nexov1alpha1.ReasonInvalidReference, words: []string{"NexoQueryGuard", "NexoNothing"}},
		{name: "router with distinct routes", obj: &nexov1alpha1.NexoRouter{Spec: nexov1alpha1.NexoRouterSpec{Routes: []nexov1alpha1.Route{
			{Database: "orders", Collections: []string{"a"}}, {Database: "orders", Collections: []string{"b"}}, {Database: "*"}}}}},
		{name: "router route shadowed by a wildcard", obj: &nexov1alpha1.NexoRouter{Spec: nexov1alpha1.NexoRouterSpec{Routes: []nexov1alpha1.Route{
			{Database: "*"}, {Database: "orders"}}}},
			reason: nexov1alpha1.ReasonInvalidSpec, words: []string{"spec.routes[1]", "routes[0]", "never match"}},
		{name: "router route shadowed by its collections", obj: &nexov1alpha1.NexoRouter{Spec: nexov1alpha1.NexoRouterSpec{Routes: []nexov1alpha1.Route{
			{Database: "orders", Collections: []string{"a", "b"}}, {Database: "orders", Collections: []string{"b"}}}}},
			reason: nexov1alpha1.ReasonInvalidSpec, words: []string{"spec.routes[1]"}},
		{name: "split over distinct addresses", obj: &nexov1alpha1.NexoTrafficSplit{Spec: nexov1alpha1.NexoTrafficSplitSpec{
			Targets: []nexov1alpha1.WeightedTarget{target("a", "a:27017"), target("b", "b:27017")}}}},
		{name: "split with one address twice", obj: &nexov1alpha1.NexoTrafficSplit{Spec: nexov1alpha1.NexoTrafficSplitSpec{
			Targets: []nexov1alpha1.WeightedTarget{target("a", "a:27017"), target("b", "a:27017")}}},
			reason: nexov1alpha1.ReasonInvalidSpec, words: []string{"spec.targets[1].address", "merge them"}},
		{name: "auth mappings by distinct identities", obj: &nexov1alpha1.NexoAuthPolicy{Spec: nexov1alpha1.NexoAuthPolicySpec{Mappings: []nexov1alpha1.CredentialMapping{
			{Username: "app"}, {CertificateSubject: "CN=app"}}}}},
		{name: "auth mapping repeated", obj: &nexov1alpha1.NexoAuthPolicy{Spec: nexov1alpha1.NexoAuthPolicySpec{Mappings: []nexov1alpha1.CredentialMapping{
			{Username: "app"}, {Username: "app"}}}},
			reason: nexov1alpha1.ReasonInvalidSpec, words: []string{"spec.mappings[1]", "mappings[0]", "username app"}},
		{name: "masking one rule per pattern", obj: &nexov1alpha1.NexoPIIMasking{Spec: nexov1alpha1.NexoPIIMaskingSpec{Rules: []nexov1alpha1.MaskingRule{
			{FieldPattern: "ssn"}, {FieldPattern: "email"}}}}},
		{name: "masking pattern twice", obj: &nexov1alpha1.NexoPIIMasking{Spec: nexov1alpha1.NexoPIIMaskingSpec{Rules: []nexov1alpha1.MaskingRule{
			{FieldPattern: "ssn"}, {FieldPattern: "ssn"}}}},
			reason: nexov1alpha1.ReasonInvalidSpec, words: []string{"spec.rules[1].fieldPattern", "rules[0]"}},
		{name: "tracing over http with a path", obj: &nexov1alpha1.NexoTracing{Spec: nexov1alpha1.NexoTracingSpec{Endpoint: "https://otel:4318/v1/traces", Protocol: "http"}}},
		{name: "tracing over grpc", obj: &nexov1alpha1.NexoTracing{Spec: nexov1alpha1.NexoTracingSpec{Endpoint: "http://otel:4317", Protocol: "grpc"}}},
		{name: "tracing over grpc with a path", obj: &nexov1alpha1.NexoTracing{Spec: nexov1alpha1.NexoTracingSpec{Endpoint: "http://otel:4317/v1", Protocol: "grpc"}},
			reason: nexov1alpha1.ReasonInvalidSpec, words: []string{"spec.endpoint", "no path"}},
		{name: "tracing with user:password", obj: &nexov1alpha1.NexoTracing{Spec: nexov1alpha1.NexoTracingSpec{Endpoint: "https://u:s3cret@otel:4318", Protocol: "http"}},
			reason: nexov1alpha1.ReasonInvalidSpec, words: []string{"spec.endpoint", "headersSecretRef"}, never: "s3cret"},
		{name: "tracing with a token as user", obj: &nexov1alpha1.NexoTracing{Spec: nexov1alpha1.NexoTracingSpec{Endpoint: "http://s3cret@otel:4317", Protocol: "grpc"}},
			reason: nexov1alpha1.ReasonInvalidSpec, words: []string{"headersSecretRef"}, never: "s3cret"},
		{name: "audit webhook with credentials", obj: &nexov1alpha1.NexoAuditLog{Spec: nexov1alpha1.NexoAuditLogSpec{Sink: nexov1alpha1.AuditSink{Type: "Webhook", URL: "https://s3cret@audit/hook"}}},
			reason: nexov1alpha1.ReasonInvalidSpec, words: []string{"spec.sink.url", "sink.authSecretRef"}, never: "s3cret"},
		{name: "audit webhook with an @ in the query", obj: &nexov1alpha1.NexoAuditLog{Spec: nexov1alpha1.NexoAuditLogSpec{Sink: nexov1alpha1.AuditSink{Type: "Webhook", URL: "https://audit/hook?x=@"}}}},
		{name: "audit to stdout", obj: &nexov1alpha1.NexoAuditLog{Spec: nexov1alpha1.NexoAuditLogSpec{Sink: nexov1alpha1.AuditSink{Type: "Stdout"}}}},
		{name: "proxy observing reconciled kinds", obj: &nexov1alpha1.NexoProxy{Spec: nexov1alpha1.NexoProxySpec{ObservabilityRefs: []nexov1alpha1.ObservabilityRef{{Kind: "NexoMetrics", Name: "m"}}}}},
		{name: "proxy observing a step kind", obj: &nexov1alpha1.NexoProxy{Spec: nexov1alpha1.NexoProxySpec{ObservabilityRefs: []nexov1alpha1.ObservabilityRef{{Kind: "NexoMetrics", Name: "m"}, {Kind: "NexoRateLimit", Name: "r"}}}},
			reason: nexov1alpha1.ReasonInvalidReference, words: []string{"spec.observabilityRefs[1].kind", "NexoRateLimit", "NexoTracing"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			errs := tc.obj.Validate()
			reason := nexov1alpha1.ReasonFor(errs)
			msg := errs.ToAggregate()
			if reason != tc.reason {
				t.Fatalf("reason %q, want %q (%v)", reason, tc.reason, msg)
			}
			if msg == nil {
				return
			}
			for _, w := range tc.words {
				if !strings.Contains(msg.Error(), w) {
					t.Errorf("message %q does not name %q", msg, w)
				}
			}
			if tc.never != "" && strings.Contains(msg.Error(), tc.never) {
				t.Errorf("message %q repeats %q", msg, tc.never)
			}
		})
	}
}

// Every reconciled kind with Go-side rules implements Validator; Validate of a kind without rules
// is empty.
func TestValidatorsCoverTheRuledKinds(t *testing.T) {
	ruled := []string{"NexoPipeline", "NexoRouter", "NexoTrafficSplit", "NexoAuthPolicy", "NexoPIIMasking", "NexoTracing", "NexoAuditLog", "NexoProxy"}
	s := nexov1alpha1.SchemeBuilder
	scheme, _ := s.Build()
	for _, k := range catalog.Kinds {
		o, err := scheme.New(nexov1alpha1.GroupVersion.WithKind(k.Kind))
		if err != nil {
			t.Fatal(err)
		}
		_, has := o.(nexov1alpha1.Validator)
		if has != slices.Contains(ruled, k.Kind) {
			t.Errorf("%s implements Validator: %v", k.Kind, has)
		}
		if errs := nexov1alpha1.Validate(o); len(errs) > 0 {
			t.Errorf("empty %s: %v", k.Kind, errs)
		}
	}
}

func TestSecretNames(t *testing.T) {
	ca := func(name string) *nexov1alpha1.UpstreamTLS {
		return &nexov1alpha1.UpstreamTLS{CASecretRef: &nexov1alpha1.SecretReference{Name: name}}
	}
	for _, tc := range []struct {
		name string
		obj  any
		want []string
	}{
		{"proxy", &nexov1alpha1.NexoProxy{Spec: nexov1alpha1.NexoProxySpec{Upstream: nexov1alpha1.Target{TLS: ca("up-ca")},
			TLS: &nexov1alpha1.ProxyTLS{SecretRef: nexov1alpha1.SecretReference{Name: "serving"}, ClientCASecretRef: &nexov1alpha1.SecretReference{Name: "clients"}}}},
			[]string{"up-ca", "serving", "clients"}},
		{"proxy without TLS", &nexov1alpha1.NexoProxy{}, nil},
		{"router", &nexov1alpha1.NexoRouter{Spec: nexov1alpha1.NexoRouterSpec{Targets: []nexov1alpha1.Target{{TLS: ca("a")}, {}, {TLS: &nexov1alpha1.UpstreamTLS{}}}}}, []string{"a"}},
		{"split", &nexov1alpha1.NexoTrafficSplit{Spec: nexov1alpha1.NexoTrafficSplitSpec{Targets: []nexov1alpha1.WeightedTarget{{Target: nexov1alpha1.Target{TLS: ca("b")}}}}}, []string{"b"}},
		{"auth policy", &nexov1alpha1.NexoAuthPolicy{Spec: nexov1alpha1.NexoAuthPolicySpec{Mappings: []nexov1alpha1.CredentialMapping{
			{CredentialsSecretRef: nexov1alpha1.SecretReference{Name: "c1"}}, {CredentialsSecretRef: nexov1alpha1.SecretReference{Name: "c2"}}}}}, []string{"c1", "c2"}},
		{"masking", &nexov1alpha1.NexoPIIMasking{Spec: nexov1alpha1.NexoPIIMaskingSpec{HashSaltSecretRef: &nexov1alpha1.SecretKeyReference{Name: "salt"}}}, []string{"salt"}},
		{"tracing", &nexov1alpha1.NexoTracing{Spec: nexov1alpha1.NexoTracingSpec{HeadersSecretRef: &nexov1alpha1.SecretReference{Name: "hdr"}}}, []string{"hdr"}},
		{"audit log", &nexov1alpha1.NexoAuditLog{Spec: nexov1alpha1.NexoAuditLogSpec{Sink: nexov1alpha1.AuditSink{AuthSecretRef: &nexov1alpha1.SecretKeyReference{Name: "tok"}}}}, []string{"tok"}},
		{"license", &nexov1alpha1.NexoLicense{Spec: nexov1alpha1.NexoLicenseSpec{SecretRef: nexov1alpha1.SecretKeyReference{Name: "doc"}}}, []string{"doc"}},
		{"a kind without Secrets", &nexov1alpha1.NexoRateLimit{}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := nexov1alpha1.SecretNamesOf(tc.obj); !slices.Equal(got, tc.want) {
				t.Errorf("SecretNames = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPipelineRefsInOrder(t *testing.T) {
	p := &nexov1alpha1.NexoPipeline{Spec: nexov1alpha1.NexoPipelineSpec{
		Router:     &nexov1alpha1.RouterRef{Kind: "NexoRouter", Name: "r"},
		Request:    []nexov1alpha1.RequestStepRef{{Kind: "NexoRateLimit", Name: "a"}, {Kind: "NexoCommandPolicy", Name: "b"}},
		Response:   []nexov1alpha1.ResponseStepRef{{Kind: "NexoResponseLimit", Name: "c"}},
		Connection: []nexov1alpha1.ConnectionStepRef{{Kind: "NexoConnectionPool", Name: "d"}},
	}}
	var got []string
	for _, r := range p.Refs() {
		got = append(got, r.String()+" @"+r.Path().String())
	}
	want := []string{"router NexoRouter/r @spec.router", "request[0] NexoRateLimit/a @spec.request[0]", "request[1] NexoCommandPolicy/b @spec.request[1]",
		"response[0] NexoResponseLimit/c @spec.response[0]", "connection[0] NexoConnectionPool/d @spec.connection[0]"}
	if !slices.Equal(got, want) {
		t.Errorf("Refs = %q, want %q", got, want)
	}
	if len((&nexov1alpha1.NexoPipeline{}).Refs()) != 0 {
		t.Error("an empty pipeline has references")
	}
}

func TestReasonFor(t *testing.T) {
	p := field.NewPath("spec")
	for _, tc := range []struct {
		errs field.ErrorList
		want string
	}{
		{nil, ""},
		{field.ErrorList{field.Invalid(p, 1, "x")}, nexov1alpha1.ReasonInvalidSpec},
		{field.ErrorList{field.Duplicate(p, 1)}, nexov1alpha1.ReasonInvalidSpec},
		{field.ErrorList{field.Forbidden(p, "x")}, nexov1alpha1.ReasonUnsupportedReference},
		{field.ErrorList{field.Invalid(p, 1, "x"), field.Forbidden(p, "x")}, nexov1alpha1.ReasonUnsupportedReference},
		{field.ErrorList{field.Forbidden(p, "x"), field.NotSupported(p, "k", []string{"a"})}, nexov1alpha1.ReasonInvalidReference},
	} {
		if got := nexov1alpha1.ReasonFor(tc.errs); got != tc.want {
			t.Errorf("ReasonFor(%v) = %q, want %q", tc.errs, got, tc.want)
		}
	}
}
