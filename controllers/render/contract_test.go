package render_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/catalog"
	"github.com/nexo-io/nexo-edge/controllers/render"
)

// update rewrites the runtime contract's examples (docs/runtime/example) from this build's
// rendering: make generate runs it.
var update = flag.Bool("update", false, "rewrite docs/runtime/example from this build's rendering")

const runtimeDocs = "../../docs/runtime"

// sampleGraph is the graph of config/samples (a router, eight steps, four observability
// objects), resolved as the operator resolves it, with what the samples leave out so that every
// kind of Secret reference shows: client TLS with a client CA, an upstream CA, exporter headers
// and a webhook token for the audit log, and a step container for every step kind.
func sampleGraph(t *testing.T) *render.Graph {
	t.Helper()
	objects := map[string]nexov1alpha1.Object{}
	for _, k := range catalog.Kinds {
		raw, err := os.ReadFile(filepath.Join("../../config/samples", "nexo.io_v1alpha1_"+strings.ToLower(k.Kind)+".yaml"))
		if err != nil {
			t.Fatal(err)
		}
		o, err := scheme().New(nexov1alpha1.GroupVersion.WithKind(k.Kind))
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.UnmarshalStrict(raw, o); err != nil {
			t.Fatalf("%s sample: %v", k.Kind, err)
		}
		objects[k.Kind] = admitted(t, k, o).(nexov1alpha1.Object)
	}
	proxy := objects["NexoProxy"].(*nexov1alpha1.NexoProxy)
	proxy.Namespace = "shop"
	proxy.Spec.TLS = &nexov1alpha1.ProxyTLS{SecretRef: nexov1alpha1.SecretReference{Name: "orders-proxy-tls"}, ClientCASecretRef: &nexov1alpha1.SecretReference{Name: "client-ca"}}
	proxy.Spec.Upstream.TLS = &nexov1alpha1.UpstreamTLS{CASecretRef: &nexov1alpha1.SecretReference{Name: "mongo-ca"}}
	objects["NexoTracing"].(*nexov1alpha1.NexoTracing).Spec.HeadersSecretRef = &nexov1alpha1.SecretReference{Name: "otel-headers"}
	audit := objects["NexoAuditLog"].(*nexov1alpha1.NexoAuditLog)
	audit.Spec.Sink = nexov1alpha1.AuditSink{Type: "Webhook", URL: "https://audit.example.com/ingest", AuthSecretRef: &nexov1alpha1.SecretKeyReference{Name: "audit-webhook", Key: "token"}}
	pipeline := objects["NexoPipeline"].(*nexov1alpha1.NexoPipeline)
	profile := objects["NexoDeploymentProfile"].(*nexov1alpha1.NexoDeploymentProfile)
	profile.Spec.StepCatalog = nil
	for _, k := range catalog.Kinds {
		if k.Role == catalog.RoleStep && k.Support == catalog.Reconciled {
			profile.Spec.StepCatalog = append(profile.Spec.StepCatalog, nexov1alpha1.StepImage{Kind: k.Kind, Image: nexov1alpha1.Image("registry.example.com/nexo/" + strings.ToLower(k.Kind[len("Nexo"):]) + ":0.3.0")})
		}
	}
	g := &render.Graph{Proxy: proxy, Pipeline: pipeline, Profile: profile, OperatorNamespace: "nexo-system"}
	for _, ref := range proxy.Graph(pipeline)[1:] {
		switch ref.Role {
		case "profile", "license":
			continue
		}
		g.Add(ref.Kind, ref.Name, catalog.Slot(ref.Role), objects[ref.Kind])
	}
	return g
}

// admitted is obj as the API server stores it: with its CRD's defaults (config/crd/bases).
func admitted(t *testing.T, k catalog.Kind, obj runtime.Object) runtime.Object {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("../../config/crd/bases", "nexo.io_"+k.Plural+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(raw, crd); err != nil {
		t.Fatal(err)
	}
	internal := &apiextensions.JSONSchemaProps{}
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(crd.Spec.Versions[0].Schema.OpenAPIV3Schema, internal, nil); err != nil {
		t.Fatal(err)
	}
	structural, err := structuralschema.NewStructural(internal)
	if err != nil {
		t.Fatal(err)
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	structuraldefaulting.Default(u, structural)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u, obj); err != nil {
		t.Fatal(err)
	}
	return obj
}

func scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := nexov1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}

func compileSchema(t *testing.T, file string) *jsonschema.Schema {
	t.Helper()
	path, err := filepath.Abs(filepath.Join(runtimeDocs, file))
	if err != nil {
		t.Fatal(err)
	}
	s, err := jsonschema.NewCompiler().Compile(path)
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return s
}

func validate(t *testing.T, s *jsonschema.Schema, doc string) error {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	return s.Validate(v)
}

// The rendered config of the sample graph, of every graph of the Secret tests and of the
// render tests follows the JSON Schemas docs/runtime.md publishes; the schemas refuse what the
// contract does not allow (a key it does not name, a spec that is not its kind's).
func TestRenderedConfigFollowsTheSchema(t *testing.T) {
	routing, steps := compileSchema(t, "routing.schema.json"), compileSchema(t, "steps.schema.json")
	// Graphs of admitted objects: the samples, and a proxy with no steps. (The render tests'
	// hand-made specs lack what the API server defaults.)
	graphs := map[string]*render.Graph{"samples": sampleGraph(t), "plain": plainGraph()}
	for name, g := range graphs {
		for cm, data := range render.ConfigData(g, render.Revision(g)) {
			if doc, ok := data["routing.json"]; ok {
				if err := validate(t, routing, doc); err != nil {
					t.Errorf("%s: %s routing.json: %v", name, cm, err)
				}
			}
			if doc, ok := data["steps.json"]; ok {
				if err := validate(t, steps, doc); err != nil {
					t.Errorf("%s: %s steps.json: %v", name, cm, err)
				}
			}
		}
	}
	// The schemas can fail.
	good := string(mustMarshal(t, render.Steps(sampleGraph(t))))
	for what, bad := range map[string]string{
		"an unknown key":              strings.Replace(good, `"container"`, `"runsIn":"x","container"`, 1),
		"a kind in a slot it is not":  strings.Replace(good, `"slot":"request"`, `"slot":"router"`, 1),
		"a spec not of its kind":      strings.Replace(good, `"tenantField"`, `"operationsPerSecond":5,"tenantField"`, 1),
		"a container that is not one": strings.Replace(good, `"container":"step-tenantisolation"`, `"container":"sidecar"`, 1),
	} {
		if bad == good {
			t.Fatalf("%s: the mutation did not apply", what)
		}
		if err := validate(t, steps, bad); err == nil {
			t.Errorf("steps.json with %s passes the schema", what)
		}
	}
}

func mustMarshal(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The examples docs/runtime.md shows are this build's rendering of the sample graph: the pod
// template, routing.json and steps.json. A rendering change that is not in the examples fails
// here; make generate rewrites them (go test -run TestRuntimeContractExamples -update).
func TestRuntimeContractExamples(t *testing.T) {
	g := sampleGraph(t)
	rev := render.Revision(g)
	d := render.Deployment(g, render.ConfigHash(render.ConfigData(g, rev), nil), rev)
	pod, err := yaml.Marshal(d.Spec.Template)
	if err != nil {
		t.Fatal(err)
	}
	examples := map[string][]byte{
		"pod-template.yaml": pod,
		"routing.json":      indent(t, mustMarshal(t, render.Routing(g))),
		"steps.json":        indent(t, mustMarshal(t, render.Steps(g))),
	}
	dir := filepath.Join(runtimeDocs, "example")
	for name, want := range examples {
		path := filepath.Join(dir, name)
		if *update {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (make generate writes it)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("docs/runtime/example/%s is not what this build renders; run make generate and review the change to the runtime contract (docs/runtime.md)", name)
		}
	}
}

func indent(t *testing.T, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		t.Fatal(err)
	}
	return append(out.Bytes(), '\n')
}
