// Command runtimeschema writes the JSON Schemas of the config files the operator renders for a
// proxy pod (docs/runtime.md): docs/runtime/routing.schema.json and steps.schema.json. The
// schemas are reflected from the rendering types (controllers/render, RoutingConfig and
// StepsConfig, with their doc comments); a component's spec is the spec of its kind's CRD
// (config/crd/bases), chosen by its kind. Run from the repository root by make generate.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/invopop/jsonschema"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/nexo-io/nexo-edge/catalog"
	"github.com/nexo-io/nexo-edge/controllers/render"
)

const out = "docs/runtime"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "runtimeschema:", err)
		os.Exit(1)
	}
}

func run() error {
	specs, err := componentSpecs()
	if err != nil {
		return err
	}
	for file, v := range map[string]any{"routing.schema.json": render.RoutingConfig{}, "steps.schema.json": render.StepsConfig{}} {
		r := &jsonschema.Reflector{BaseSchemaID: "https://nexo.io/schemas/runtime/v1"}
		if err := r.AddGoComments("github.com/nexo-io/nexo-edge", "./controllers/render"); err != nil {
			return err
		}
		if err := r.AddGoComments("github.com/nexo-io/nexo-edge", "./api/v1alpha1"); err != nil {
			return err
		}
		doc, err := withComponentSpecs(r.Reflect(v), specs)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(out, file), append(doc, '\n'), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// componentSpecs are the spec schemas of the kinds that can be a component (a router, a step,
// an observability object), from their CRDs, by kind.
func componentSpecs() (map[string]any, error) {
	specs := map[string]any{}
	for _, k := range catalog.Kinds {
		if k.Support != catalog.Reconciled || len(k.Slots) == 0 {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("config", "crd", "bases", "nexo.io_"+k.Plural+".yaml"))
		if err != nil {
			return nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(raw, crd); err != nil {
			return nil, fmt.Errorf("%s: %w", k.Kind, err)
		}
		spec := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
		b, err := json.Marshal(spec)
		if err != nil {
			return nil, err
		}
		var v any
		if err := json.Unmarshal(b, &v); err != nil {
			return nil, err
		}
		closeObjects(v)
		specs[k.Kind] = v
	}
	return specs, nil
}

// closeObjects sets additionalProperties false on every object of a CRD schema that lists its
// properties: the API server prunes what its schema does not name, so a stored spec never has
// other keys, and a config that has one was not rendered from a stored spec.
func closeObjects(v any) {
	switch n := v.(type) {
	case map[string]any:
		_, preserve := n["x-kubernetes-preserve-unknown-fields"]
		if _, ok := n["properties"]; ok && !preserve {
			if _, set := n["additionalProperties"]; !set {
				n["additionalProperties"] = false
			}
		}
		for _, c := range n {
			closeObjects(c)
		}
	case []any:
		for _, c := range n {
			closeObjects(c)
		}
	}
}

// withComponentSpecs adds to the ComponentConfig definition: the kinds and slots it can hold,
// and, by kind, the schema of its spec.
func withComponentSpecs(s *jsonschema.Schema, specs map[string]any) ([]byte, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return nil, err
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	defs, _ := doc["$defs"].(map[string]any)
	component, ok := defs["ComponentConfig"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("no ComponentConfig definition")
	}
	props := component["properties"].(map[string]any)
	var kinds, slots []any
	var cases []any
	for _, k := range catalog.Kinds {
		spec, ok := specs[k.Kind]
		if !ok {
			continue
		}
		kinds = append(kinds, k.Kind)
		defs[k.Kind+"Spec"] = spec
		var kindSlots []any
		for _, s := range k.Slots {
			kindSlots = append(kindSlots, string(s))
		}
		cases = append(cases, map[string]any{
			"if": map[string]any{"properties": map[string]any{"kind": map[string]any{"const": k.Kind}}, "required": []any{"kind"}},
			"then": map[string]any{"properties": map[string]any{
				"spec": map[string]any{"$ref": "#/$defs/" + k.Kind + "Spec"},
				"slot": map[string]any{"enum": kindSlots},
			}},
		})
	}
	for _, s := range catalog.Slots {
		slots = append(slots, string(s))
	}
	props["kind"].(map[string]any)["enum"] = kinds
	props["slot"].(map[string]any)["enum"] = slots
	props["container"].(map[string]any)["pattern"] = "^(" + render.IngressContainer + "|" + render.EgressContainer + "|step-[a-z]+)$"
	component["allOf"] = cases
	if routing, ok := defs["RoutingConfig"].(map[string]any); ok {
		routing["properties"].(map[string]any)["contractVersion"].(map[string]any)["const"] = render.ContractVersion
	}
	return json.MarshalIndent(doc, "", "  ")
}
