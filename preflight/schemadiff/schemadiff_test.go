package schemadiff

import (
	"encoding/json"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/utils/ptr"

	"github.com/nexo-io/nexo-edge/catalog"
	"github.com/nexo-io/nexo-edge/config/crd"
)

// build is a deep copy of this build's CRDs.
func build(t *testing.T) map[string]*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	byKind, err := crd.ByKind()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for k, c := range byKind {
		out[k] = c.DeepCopy()
	}
	return out
}

// mutate applies f to the node at path and writes it back.
func mutate(t *testing.T, c *apiextensionsv1.CustomResourceDefinition, path string, f func(*apiextensionsv1.JSONSchemaProps)) {
	t.Helper()
	var set func(p *apiextensionsv1.JSONSchemaProps, parts []string)
	set = func(p *apiextensionsv1.JSONSchemaProps, parts []string) {
		if len(parts) == 0 {
			f(p)
			return
		}
		if parts[0] == "[*]" {
			set(p.Items.Schema, parts[1:])
			return
		}
		n, ok := p.Properties[parts[0]]
		if !ok {
			t.Fatalf("%s has no %s", c.Spec.Names.Kind, path)
		}
		set(&n, parts[1:])
		p.Properties[parts[0]] = n
	}
	set(c.Spec.Versions[0].Schema.OpenAPIV3Schema, strings.Split(path, "."))
}

func raw(v any) *apiextensionsv1.JSON {
	b, _ := json.Marshal(v)
	return &apiextensionsv1.JSON{Raw: b}
}

// Every change the release notes must classify, one at a time on this build's CRDs: the rule
// (crdify's name where it has one), the severity, and a migration for what breaks.
func TestEveryChangeIsClassified(t *testing.T) {
	if r := Compare("a", build(t), "b", build(t)); len(r.Changes) != 0 {
		t.Fatalf("identical CRDs: %+v", r.Changes)
	}
	for _, tc := range []struct {
		name     string
		change   func(t *testing.T, m map[string]*apiextensionsv1.CustomResourceDefinition)
		path     string
		rule     string
		severity Severity
		words    string
	}{
		{"removed field", func(t *testing.T, m map[string]*apiextensionsv1.CustomResourceDefinition) {
			mutate(t, m["NexoProxy"], "spec", func(p *apiextensionsv1.JSONSchemaProps) { delete(p.Properties, "proxyImage") })
		}, "spec.proxyImage", "existingFieldRemoval", Breaking, "field removed"},
		{"added field", func(t *testing.T, m map[string]*apiextensionsv1.CustomResourceDefinition) {
			mutate(t, m["NexoProxy"], "spec", func(p *apiextensionsv1.JSONSchemaProps) {
				p.Properties["drain"] = apiextensionsv1.JSONSchemaProps{Type: "string"}
			})
		}, "spec.drain", "fieldAdded", Safe, "field added"},
		{"type change", func(t *testing.T, m map[string]*apiextensionsv1.CustomResourceDefinition) {
			mutate(t, m["NexoProxy"], "spec.replicas", func(p *apiextensionsv1.JSONSchemaProps) { p.Type = "string"; p.Minimum, p.Maximum = nil, nil })
		}, "spec.replicas", "type", Breaking, "integer → string"},
		{"enum narrowed", func(t *testing.T, m map[string]*apiextensionsv1.CustomResourceDefinition) {
			mutate(t, m["NexoProxy"], "spec.observabilityRefs.[*].kind", func(p *apiextensionsv1.JSONSchemaProps) { p.Enum = p.Enum[:1] })
		}, "spec.observabilityRefs[*].kind", "enum", Breaking, "enum narrowed"},
		{"enum widened", func(t *testing.T, m map[string]*apiextensionsv1.CustomResourceDefinition) {
			mutate(t, m["NexoProxy"], "spec.observabilityRefs.[*].kind", func(p *apiextensionsv1.JSONSchemaProps) { p.Enum = append(p.Enum, *raw("NexoProfiler")) })
		}, "spec.observabilityRefs[*].kind", "enum", Safe, `enum widened: added "NexoProfiler"`},
		{"new required field", func(t *testing.T, m map[string]*apiextensionsv1.CustomResourceDefinition) {
			mutate(t, m["NexoProxy"], "spec", func(p *apiextensionsv1.JSONSchemaProps) { p.Required = append(p.Required, "proxyImage") })
		}, "spec.proxyImage", "required", Breaking, "new required field"},
		{"default added", func(t *testing.T, m map[string]*apiextensionsv1.CustomResourceDefinition) {
			mutate(t, m["NexoProxy"], "spec.replicas", func(p *apiextensionsv1.JSONSchemaProps) { p.Default = raw(2) })
		}, "spec.replicas", "default", Risky, "default 2 added"},
		{"default changed", func(t *testing.T, m map[string]*apiextensionsv1.CustomResourceDefinition) {
			mutate(t, m["NexoProxy"], "spec.port", func(p *apiextensionsv1.JSONSchemaProps) { p.Default = raw(27018) })
		}, "spec.port", "default", Risky, "default 27017 → 27018"},
		{"default removed", func(t *testing.T, m map[string]*apiextensionsv1.CustomResourceDefinition) {
			mutate(t, m["NexoProxy"], "spec.port", func(p *apiextensionsv1.JSONSchemaProps) { p.Default = nil })
		}, "spec.port", "default", Risky, "default 27017 removed"},
		{"max decreased", func(t *testing.T, m map[string]*apiextensionsv1.CustomResourceDefinition) {
			mutate(t, m["NexoProxy"], "spec.replicas", func(p *apiextensionsv1.JSONSchemaProps) { p.Maximum = ptr.To(10.0) })
		}, "spec.replicas", "maximum", Breaking, "maximum decreased 100 → 10"},
		{"max increased", func(t *testing.T, m map[string]*apiextensionsv1.CustomResourceDefinition) {
			mutate(t, m["NexoProxy"], "spec.replicas", func(p *apiextensionsv1.JSONSchemaProps) { p.Maximum = ptr.To(200.0) })
		}, "spec.replicas", "maximum", Safe, "maximum 100 → 200"},
		{"min increased", func(t *testing.T, m map[string]*apiextensionsv1.CustomResourceDefinition) {
			mutate(t, m["NexoProxy"], "spec.replicas", func(p *apiextensionsv1.JSONSchemaProps) { p.Minimum = ptr.To(1.0) })
		}, "spec.replicas", "minimum", Breaking, "minimum increased 0 → 1"},
		{"maxLength decreased", func(t *testing.T, m map[string]*apiextensionsv1.CustomResourceDefinition) {
			mutate(t, m["NexoProxy"], "spec.upstream.address", func(p *apiextensionsv1.JSONSchemaProps) { p.MaxLength = ptr.To[int64](100) })
		}, "spec.upstream.address", "maxLength", Breaking, "maxLength decreased 260 → 100"},
		{"pattern added", func(t *testing.T, m map[string]*apiextensionsv1.CustomResourceDefinition) {
			mutate(t, m["NexoProxy"], "spec.upstream.address", func(p *apiextensionsv1.JSONSchemaProps) { p.Pattern = `^[a-z.]+:[0-9]+$` })
		}, "spec.upstream.address", "pattern", Risky, "pattern"},
		{"CEL rule added", func(t *testing.T, m map[string]*apiextensionsv1.CustomResourceDefinition) {
			mutate(t, m["NexoProxy"], "spec", func(p *apiextensionsv1.JSONSchemaProps) {
				p.XValidations = append(p.XValidations, apiextensionsv1.ValidationRule{Rule: "self.replicas <= 10"})
			})
		}, "spec", "celRule", Risky, "CEL rule added: self.replicas <= 10"},
		{"stored version removed", func(t *testing.T, m map[string]*apiextensionsv1.CustomResourceDefinition) {
			m["NexoProxy"].Spec.Versions[0].Name = "v1beta1"
		}, "", "storedVersionRemoval", Breaking, "version v1alpha1 removed"},
		{"kind removed", func(t *testing.T, m map[string]*apiextensionsv1.CustomResourceDefinition) {
			delete(m, "NexoTracing")
		}, "", "kindRemoved", Breaking, "kind removed"},
		{"support to schema-only", func(t *testing.T, m map[string]*apiextensionsv1.CustomResourceDefinition) {
			m["NexoRateLimit"].Labels[catalog.SupportLabel] = string(catalog.SchemaOnly)
		}, "", "supportChange", Breaking, "reconciled → schema-only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next := build(t)
			tc.change(t, next)
			r := Compare("old", build(t), "new", next)
			found := false
			for _, c := range r.Changes {
				if c.Rule == tc.rule && c.Path == tc.path {
					found = true
					if c.Severity != tc.severity || !strings.Contains(c.Change, tc.words) {
						t.Errorf("%+v, want %s and %q", c, tc.severity, tc.words)
					}
					if c.Severity == Breaking && (c.Migration == "" || c.Migration == "none") {
						t.Errorf("a breaking change with no migration: %+v", c)
					}
				}
			}
			if !found {
				t.Errorf("no %s change at %q in %+v", tc.rule, tc.path, r.Changes)
			}
			md := r.Markdown()
			if !strings.Contains(md, "`"+tc.rule+"`") || !strings.Contains(md, string(tc.severity)) {
				t.Errorf("markdown:\n%s", md)
			}
		})
	}
	// Adding a kind, the other way round.
	old := build(t)
	delete(old, "NexoTracing")
	r := Compare("old", old, "new", build(t))
	if len(r.Changes) != 1 || r.Changes[0].Rule != "kindAdded" || r.Changes[0].Severity != Safe || !strings.Contains(r.Markdown(), "Kinds added: NexoTracing") {
		t.Errorf("kind added: %+v", r.Changes)
	}
}
