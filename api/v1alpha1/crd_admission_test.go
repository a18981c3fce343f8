package v1alpha1_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nexo-io/nexo-edge/catalog"
	"github.com/nexo-io/nexo-edge/test/framework/testcluster"
)

var (
	cluster *testcluster.Cluster
	k8s     client.Client
)

func TestMain(m *testing.M) {
	ctx := context.Background()
	var err error
	cluster, err = testcluster.Start(ctx, testcluster.Options{
		Mode:              testcluster.Envtest,
		CRDDirectoryPaths: []string{testcluster.CRDDir()},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "start test cluster:", err)
		os.Exit(1)
	}
	k8s, err = client.New(cluster.Config, client.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	if err := cluster.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stop test cluster:", err)
	}
	os.Exit(code)
}

func newNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "crd-test-"}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

func TestAllCRDsEstablished(t *testing.T) {
	ctx := context.Background()
	cs := apiextclient.NewForConfigOrDie(cluster.Config)
	list, err := cs.ApiextensionsV1().CustomResourceDefinitions().List(ctx, metav1.ListOptions{LabelSelector: catalog.SupportLabel})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != len(catalog.Kinds) {
		t.Fatalf("%d nexo CRDs installed, want %d", len(list.Items), len(catalog.Kinds))
	}
	for _, crd := range list.Items {
		established := false
		for _, c := range crd.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				established = true
			}
		}
		if !established {
			t.Errorf("%s is not Established", crd.Name)
		}
		if !slices.Equal(crd.Status.StoredVersions, []string{catalog.Version}) {
			t.Errorf("%s stores %v, want [v1alpha1]", crd.Name, crd.Status.StoredVersions)
		}
	}

	// Discovery serves every kind with the nexo category and its short name, so
	// `kubectl get nexo -A` lists them all.
	dc := discovery.NewDiscoveryClientForConfigOrDie(cluster.Config)
	resources, err := dc.ServerResourcesForGroupVersion(catalog.Group + "/" + catalog.Version)
	if err != nil {
		t.Fatal(err)
	}
	served := map[string]metav1.APIResource{}
	for _, r := range resources.APIResources {
		if !strings.Contains(r.Name, "/") {
			served[r.Kind] = r
		}
	}
	for _, k := range catalog.Kinds {
		r, ok := served[k.Kind]
		if !ok {
			t.Errorf("%s is not served", k.Kind)
			continue
		}
		if !r.Namespaced || !slices.Contains(r.Categories, catalog.CategoryNexo) || !slices.Equal(r.ShortNames, []string{k.ShortName}) {
			t.Errorf("%s served as namespaced=%v categories=%v shortNames=%v", k.Kind, r.Namespaced, r.Categories, r.ShortNames)
		}
	}
}

func samples(t *testing.T) map[string]*unstructured.Unstructured {
	t.Helper()
	out, err := testcluster.Samples()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestSamplesAccepted(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	for kind, obj := range samples(t) {
		obj.SetNamespace(ns)
		if err := k8s.Create(ctx, obj); err != nil {
			t.Errorf("sample %s rejected: %v", kind, err)
		}
	}
	// Defaults from the schema are applied.
	proxy := &unstructured.Unstructured{}
	proxy.SetAPIVersion("nexo.io/v1alpha1")
	proxy.SetKind("NexoProxy")
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "orders-proxy"}, proxy); err != nil {
		t.Fatal(err)
	}
	if port, _, _ := unstructured.NestedInt64(proxy.Object, "spec", "port"); port != 27017 {
		t.Errorf("NexoProxy spec.port defaulted to %d, want 27017", port)
	}

	// kubectl lists every sample through the nexo category.
	kubectl := filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kubectl")
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		kubectl = filepath.Join(testcluster.RepoRoot(), "bin", "kubectl")
	}
	out, err := exec.Command(kubectl, "--kubeconfig", cluster.Kubeconfig, "get", "nexo", "-n", ns, "-o", "name").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl get nexo: %v\n%s", err, out)
	}
	if lines := strings.Fields(string(out)); len(lines) != len(catalog.Kinds) {
		t.Errorf("kubectl get nexo listed %d objects, want %d:\n%s", len(lines), len(catalog.Kinds), out)
	}
}

// invalid is a sample of kind, changed by a JSON merge patch, that admission must reject with
// a message containing want.
type invalid struct {
	kind, patch, want string
}

var invalidObjects = []invalid{
	{"NexoProxy", `{"spec":{"upstream":{"address":"mongodb://mongo:27017"}}}`, "address must be host:port with a port from 1 to 65535"},
	{"NexoProxy", `{"spec":{"upstream":{"address":"mongo:70000"}}}`, "address must be host:port with a port from 1 to 65535"},
	{"NexoProxy", `{"spec":{"port":0}}`, "spec.port in body should be greater than or equal to 1"},
	{"NexoProxy", `{"spec":{"localAccess":{"enabled":true}}}`, "localAccess.nodePort is required when localAccess.enabled is true"},
	{"NexoProxy", `{"spec":{"localAccess":{"enabled":true,"nodePort":8080}}}`, "should be greater than or equal to 30000"},
	{"NexoProxy", `{"spec":{"observabilityRefs":[{"kind":"NexoMetrics","name":"m"},{"kind":"NexoMetrics","name":"m"}]}}`, "observabilityRefs must not list the same {kind, name} twice"},
	{"NexoProxy", `{"spec":{"observabilityRefs":[{"kind":"NexoMetrics","name":"a"},{"kind":"NexoMetrics","name":"b"}]}}`, "at most one NexoMetrics can be attached"},
	{"NexoProxy", `{"spec":{"observabilityRefs":[{"kind":"NexoPIIMasking","name":"m"}]}}`, `Unsupported value: "NexoPIIMasking"`},
	{"NexoProxy", `{"spec":{"pipelineRef":null}}`, "spec.pipelineRef: Required value"},
	{"NexoProxy", `{"spec":{"proxyImage":"Not An Image"}}`, "must be an image reference"},
	{"NexoProxy", `{"spec":{"licenseRef":{"name":"Acme_License"}}}`, "name must be a lowercase DNS subdomain name"},

	{"NexoPipeline", `{"spec":{"request":[{"kind":"NexoRateLimit","name":"a"},{"kind":"NexoRateLimit","name":"a"}]}}`, "request must not list the same {kind, name} step twice"},
	{"NexoPipeline", `{"spec":{"router":{"kind":"NexoPIIMasking","name":"x"}}}`, `spec.router.kind: Unsupported value: "NexoPIIMasking"`},
	{"NexoPipeline", `{"spec":{"request":[{"kind":"NexoWhatever","name":"x"}]}}`, `Unsupported value: "NexoWhatever"`},
	{"NexoPipeline", `{"spec":{"response":[{"kind":"NexoRateLimit","name":"x"}]}}`, `spec.response[0].kind: Unsupported value: "NexoRateLimit"`},
	{"NexoPipeline", `{"spec":{"router":null,"request":[],"response":[],"connection":[]}}`, "a pipeline needs a router or at least one request, response or connection step"},

	{"NexoDeploymentProfile", `{"spec":{"images":{"ingress":"UPPER CASE"}}}`, "must be an image reference"},
	{"NexoDeploymentProfile", `{"spec":{"images":{"egress":null}}}`, "spec.images.egress: Required value"},
	{"NexoDeploymentProfile", `{"spec":{"drainTimeoutSeconds":7200}}`, "should be less than or equal to 3600"},
	{"NexoDeploymentProfile", `{"spec":{"stepCatalog":[{"kind":"NexoPIIMasking","image":"r/a:1"},{"kind":"NexoPIIMasking","image":"r/b:1"}]}}`, "Duplicate value"},
	{"NexoDeploymentProfile", `{"spec":{"stepCatalog":[{"kind":"NexoRouter","image":"r/a:1"}]}}`, `Unsupported value: "NexoRouter"`},

	{"NexoLicense", `{"spec":{"secretRef":{"key":null}}}`, "spec.secretRef.key: Required value"},
	{"NexoLicense", `{"spec":{"renewBefore":"30 days"}}`, "must be a duration such as 500ms, 30s, 5m or 1h30m"},
	{"NexoLicense", `{"spec":{"secretRef":{"name":"Bad_Name"}}}`, "secret name must be a lowercase DNS subdomain name"},

	{"NexoRouter", `{"spec":{"routes":[{"database":"x","target":"missing"}]}}`, "every route's target must name an entry in spec.targets"},
	{"NexoRouter", `{"spec":{"defaultTarget":"nope"}}`, "defaultTarget must name an entry in spec.targets"},
	{"NexoRouter", `{"spec":{"targets":[]}}`, "spec.targets: Invalid value: 0: spec.targets in body should have at least 1 items"},
	{"NexoRouter", `{"spec":{"routes":[{"database":"a.b","target":"primary"}]}}`, "database must be '*' or a MongoDB database name"},
	{"NexoRouter", `{"spec":{"targets":[{"name":"primary","address":"primary"},{"name":"analytics","address":"a:1"}]}}`, "address must be host:port"},

	{"NexoTrafficSplit", `{"spec":{"targets":[{"name":"a","address":"a:1","weight":50},{"name":"b","address":"b:1","weight":40}]}}`, "target weights must sum to 100"},
	{"NexoTrafficSplit", `{"spec":{"targets":[{"name":"a","address":"a:1","weight":120}]}}`, "should be less than or equal to 100"},
	{"NexoTrafficSplit", `{"spec":{"stickiness":"Cookie"}}`, `Unsupported value: "Cookie"`},

	{"NexoTenantIsolation", `{"spec":{"tenantField":"$tenant"}}`, "tenantField must be a dotted field path"},
	{"NexoTenantIsolation", `{"spec":{"source":{"type":"Claim"}}}`, "source.claim is required when source.type is Claim"},
	{"NexoTenantIsolation", `{"spec":{"enforcement":"Warn"}}`, `Unsupported value: "Warn"`},

	{"NexoRateLimit", `{"spec":{"burst":10}}`, "burst must be at least operationsPerSecond"},
	{"NexoRateLimit", `{"spec":{"operationsPerSecond":0}}`, "should be greater than or equal to 1"},

	{"NexoCommandPolicy", `{"spec":{"defaultAction":"Deny","deny":[]}}`, "defaultAction Deny needs at least one allowed command"},
	{"NexoCommandPolicy", `{"spec":{"allow":["find"],"deny":["find"]}}`, "a command cannot be in both allow and deny"},
	{"NexoCommandPolicy", `{"spec":{"deny":["drop database"]}}`, "should match"},

	{"NexoAuthPolicy", `{"spec":{"mappings":[{"username":"a","certificateSubject":"CN=a","credentialsSecretRef":{"name":"c"}}]}}`, "set exactly one of username or certificateSubject"},
	{"NexoAuthPolicy", `{"spec":{"mappings":[{"credentialsSecretRef":{"name":"c"}}]}}`, "set exactly one of username or certificateSubject"},
	{"NexoAuthPolicy", `{"spec":{"mappings":[]}}`, "should have at least 1 items"},

	{"NexoPIIMasking", `{"spec":{"rules":[{"fieldPattern":"a.b","action":"Redact","keepLast":2}]}}`, "keepLast applies only to action PartialMask"},
	{"NexoPIIMasking", `{"spec":{"rules":[{"fieldPattern":"a.b","action":"PartialMask"}]}}`, "action PartialMask needs keepLast"},
	{"NexoPIIMasking", `{"spec":{"hashSaltSecretRef":null}}`, "rules with action Hash need spec.hashSaltSecretRef"},
	{"NexoPIIMasking", `{"spec":{"rules":[{"fieldPattern":"a..b","action":"Redact"}]}}`, "fieldPattern must be a dotted path"},

	{"NexoResponseLimit", `{"spec":{"maxDocuments":null,"maxBytes":null}}`, "set maxDocuments, maxBytes or both"},
	{"NexoResponseLimit", `{"spec":{"maxBytes":10}}`, "should be greater than or equal to 1024"},

	{"NexoConnectionPool", `{"spec":{"minSize":200}}`, "minSize must not exceed maxSize"},
	{"NexoConnectionPool", `{"spec":{"idleTimeout":"5 minutes"}}`, "must be a duration"},

	{"NexoConnectionLimit", `{"spec":{"perClientMaxConnections":5000}}`, "perClientMaxConnections must not exceed maxConnections"},
	{"NexoConnectionLimit", `{"spec":{"maxConnections":0}}`, "should be greater than or equal to 1"},

	{"NexoMetrics", `{"spec":{"port":27017}}`, "port 27017 is the MongoDB listener"},
	{"NexoMetrics", `{"spec":{"path":"metrics"}}`, "path must start with '/'"},
	{"NexoMetrics", `{"spec":{"commandLatencyBuckets":[5,1]}}`, "commandLatencyBuckets must be strictly ascending"},

	{"NexoTracing", `{"spec":{"endpoint":"otel:4317"}}`, "endpoint must be an http:// or https:// URL"},
	{"NexoTracing", `{"spec":{"protocol":"thrift"}}`, `Unsupported value: "thrift"`},
	{"NexoTracing", `{"spec":{"endpoint":"https://user:s3cret@otel.example.com:4318"}}`, "endpoint must not carry credentials"},

	{"NexoAuditLog", `{"spec":{"sink":{"type":"Webhook"}}}`, "sink.url is required when sink.type is Webhook"},
	{"NexoAuditLog", `{"spec":{"sink":{"type":"Webhook","url":"http://audit.example.com"}}}`, "sink.url must be an https:// URL"},
	{"NexoAuditLog", `{"spec":{"commandClasses":[]}}`, "should have at least 1 items"},
	{"NexoAuditLog", `{"spec":{"sink":{"type":"Webhook","url":"https://token@audit.example.com/hook"}}}`, "sink.url must not carry credentials"},
	{"NexoAuditLog", `{"spec":{"commandClasses":["Everything"]}}`, `Unsupported value: "Everything"`},

	{"NexoAccessLog", `{"spec":{"format":"XML"}}`, `Unsupported value: "XML"`},
	{"NexoAccessLog", `{"spec":{"samplingPercent":150}}`, "should be less than or equal to 100"},
	{"NexoAccessLog", `{"spec":{"slowOperationThreshold":"fast"}}`, "must be a duration"},

	{"NexoConnectionPipeline", `{"spec":{"steps":[{"kind":"NexoConnectionPool","name":"p"},{"kind":"NexoConnectionPool","name":"p"}]}}`, "steps must not list the same {kind, name} twice"},
	{"NexoConnectionPipeline", `{"spec":{"steps":[{"kind":"NexoConnectionPipeline","name":"p"}]}}`, "a connection pipeline cannot contain another NexoConnectionPipeline"},
	{"NexoConnectionPipeline", `{"spec":{"steps":[{"kind":"NexoRouter","name":"p"}]}}`, `Unsupported value: "NexoRouter"`},

	{"NexoQueryGuard", `{"spec":{"denyOperators":["where"]}}`, "should match"},
	{"NexoQueryGuard", `{"spec":{"maxFilterDepth":null,"denyOperators":[]}}`, "set at least one guard"},

	{"NexoFieldEncryption", `{"spec":{"fields":[{"path":"a","algorithm":"AES"}]}}`, `Unsupported value: "AES"`},
	{"NexoFieldEncryption", `{"spec":{"fields":[]}}`, "should have at least 1 items"},

	{"NexoResultCache", `{"spec":{"ttl":"soon"}}`, "must be a duration"},
	{"NexoResultCache", `{"spec":{"collections":["products"]}}`, "should match"},

	{"NexoShadowTraffic", `{"spec":{"shadow":{"address":"mongo-0.mongo.db.svc:27017"}}}`, "shadow must be a different address than primary"},
	{"NexoShadowTraffic", `{"spec":{"samplingPercent":-1}}`, "should be greater than or equal to 0"},

	{"NexoSchemaValidation", `{"spec":{"action":"Drop"}}`, `Unsupported value: "Drop"`},
	{"NexoSchemaValidation", `{"spec":{"rules":[{"collection":"shop.orders","requiredFields":[]}]}}`, "should have at least 1 items"},
}

func TestInvalidObjectsRejected(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	base := samples(t)
	perKind := map[string]int{}
	for i, c := range invalidObjects {
		perKind[c.kind]++
		t.Run(fmt.Sprintf("%02d-%s", i, c.kind), func(t *testing.T) {
			sample, ok := base[c.kind]
			if !ok {
				t.Fatalf("no sample for %s", c.kind)
			}
			orig, err := json.Marshal(sample.Object)
			if err != nil {
				t.Fatal(err)
			}
			patched, err := jsonpatch.MergePatch(orig, []byte(c.patch))
			if err != nil {
				t.Fatalf("bad patch %s: %v", c.patch, err)
			}
			obj := &unstructured.Unstructured{}
			if err := json.Unmarshal(patched, &obj.Object); err != nil {
				t.Fatal(err)
			}
			obj.SetNamespace(ns)
			obj.SetName(fmt.Sprintf("invalid-%d", i))
			err = k8s.Create(ctx, obj)
			if err == nil {
				t.Fatalf("admission accepted %s patched with %s; want rejection containing %q", c.kind, c.patch, c.want)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("rejection message\n  %v\ndoes not contain\n  %q", err, c.want)
			}
		})
	}
	for _, k := range catalog.Kinds {
		if perKind[k.Kind] < 2 {
			t.Errorf("%s has %d invalid cases, want at least 2", k.Kind, perKind[k.Kind])
		}
	}
}

// TestProxyNamesMustBeRenderable: a NexoProxy name becomes its Service's name, so the API server
// refuses a name that is a valid object name but not a DNS-1035 label (before, such a proxy was
// admitted and then half-applied).
func TestProxyNamesMustBeRenderable(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	base := samples(t)["NexoProxy"]
	for name, ok := range map[string]bool{
		"orders-proxy-2":        true,
		"1proxy":                false, // a Service name must start with a letter
		"orders.proxy":          false, // dots make a subdomain, not a label
		strings.Repeat("p", 64): false,
		strings.Repeat("p", 63): true,
	} {
		p := base.DeepCopy()
		p.SetNamespace(ns)
		p.SetName(name)
		err := k8s.Create(ctx, p)
		switch {
		case ok && err != nil:
			t.Errorf("name %q refused: %v", name, err)
		case !ok && err == nil:
			t.Errorf("name %q admitted; it cannot be a Service name", name)
		case !ok && !strings.Contains(err.Error(), "must be a DNS-1035 label"):
			t.Errorf("name %q refused without saying why: %v", name, err)
		}
	}
}

// TestKubectlColumns reads the columns the way a user does, with kubectl: a license's expiry is
// a date (an age column shows <invalid> for a future time), and a schema-only kind says so.
func TestKubectlColumns(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	guard := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "nexo.io/v1alpha1", "kind": "NexoQueryGuard",
		"metadata": map[string]any{"name": "no-where", "namespace": ns}, "spec": map[string]any{"maxFilterDepth": int64(8)}}}
	lic := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "nexo.io/v1alpha1", "kind": "NexoLicense",
		"metadata": map[string]any{"name": "acme", "namespace": ns}, "spec": map[string]any{"secretRef": map[string]any{"name": "acme-license", "key": "license"}}}}
	for _, o := range []*unstructured.Unstructured{guard, lic} {
		if err := k8s.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	_ = unstructured.SetNestedField(lic.Object, "2031-06-30T00:00:00Z", "status", "expiresAt")
	_ = unstructured.SetNestedField(lic.Object, "Acme Corp", "status", "licensee")
	if err := k8s.Status().Update(ctx, lic); err != nil {
		t.Fatal(err)
	}
	// The support field is the schema's default: nobody wrote it.
	if err := k8s.Get(ctx, client.ObjectKeyFromObject(guard), guard); err != nil {
		t.Fatal(err)
	}
	if s, _, _ := unstructured.NestedString(guard.Object, "status", "support"); s != "SchemaOnly" {
		t.Errorf("status.support of a schema-only object %q, want the default SchemaOnly", s)
	}
	kubectl := filepath.Join(testcluster.BinDir(), "kubectl")
	out, err := exec.Command(kubectl, "--kubeconfig", cluster.Kubeconfig, "get", "nexolicenses,nexoqueryguards", "-n", ns).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl get: %v\n%s", err, out)
	}
	if s := string(out); !strings.Contains(s, "2031-06-30T00:00:00Z") || strings.Contains(s, "<invalid>") || !strings.Contains(s, "SchemaOnly") {
		t.Errorf("kubectl get columns:\n%s", s)
	}
}
