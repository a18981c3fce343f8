// Package upgrade decides, against a live cluster, what upgrading to this build would do
// (docs/upgrade.md, "Before upgrading"): which live Nexo objects the new schemas reject or
// silently prune, which stored versions would vanish, whether an upgrade edge exists from the
// installed version, and which NexoProxies would roll.
package upgrade

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	structuralpruning "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
)

// Finding is one thing the upgrade would do to a live object.
type Finding struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Path is the field (spec.upstream.address).
	Path string `json:"path"`
	// Rule: schema (OpenAPI validation), cel, pruned (data loss), default (a new default applies).
	Rule     string `json:"rule"`
	Breaking bool   `json:"breaking"`
	Message  string `json:"message"`
	// Action says what to do before upgrading.
	Action string `json:"action"`
}

// Schema is a CRD version's schema, in the three forms the API server's own packages use.
type Schema struct {
	structural *structuralschema.Structural
	validator  apiservervalidation.SchemaCreateValidator
	cel        *cel.Validator
}

// NewSchema prepares one CRD version's schema for checking objects, as the API server does.
func NewSchema(v *apiextensionsv1.CustomResourceValidation) (*Schema, error) {
	if v == nil || v.OpenAPIV3Schema == nil {
		return nil, fmt.Errorf("no schema")
	}
	internal := &apiextensions.JSONSchemaProps{}
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(v.OpenAPIV3Schema, internal, nil); err != nil {
		return nil, err
	}
	s, err := structuralschema.NewStructural(internal)
	if err != nil {
		return nil, err
	}
	validator, _, err := apiservervalidation.NewSchemaValidator(internal)
	if err != nil {
		return nil, err
	}
	return &Schema{structural: s, validator: validator, cel: cel.NewValidator(s, true, celconfig.PerCallLimit)}, nil
}

// Check runs a live object through the new schema the way the API server would on its next
// write: pruning (fields the schema does not know are dropped: data loss), defaulting (a new
// default takes effect), OpenAPI validation and CEL rules (an object that fails cannot be
// updated, not even to fix it, until it is changed to pass). obj is not modified.
func (s *Schema) Check(ctx context.Context, obj *unstructured.Unstructured) []Finding {
	kind, ns, name := obj.GetKind(), obj.GetNamespace(), obj.GetName()
	var out []Finding
	add := func(path, rule string, breaking bool, msg, action string) {
		out = append(out, Finding{Kind: kind, Namespace: ns, Name: name, Path: path, Rule: rule, Breaking: breaking, Message: msg, Action: action})
	}
	u := runtime.DeepCopyJSON(obj.Object)
	// The API server prunes unknown fields when it decodes: report them first.
	pruned := structuralpruning.PruneWithOptions(u, s.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})
	sort.Strings(pruned)
	for _, p := range pruned {
		if strings.HasPrefix(p, "status") || strings.HasPrefix(p, "metadata") {
			continue
		}
		add(p, "pruned", true, "the new schema has no "+p+": the API server drops its data on the object's next write",
			"copy the value of "+p+" elsewhere, or wait for a release that keeps it; after the upgrade it is gone")
	}
	before := runtime.DeepCopyJSON(u)
	structuraldefaulting.Default(u, s.structural)
	for _, p := range defaulted(before, u, "") {
		if strings.HasPrefix(p, "status") {
			continue
		}
		add(p, "default", false, "unset in the object; the new schema defaults it", "set "+p+" explicitly to keep today's behaviour")
	}
	for _, e := range apiservervalidation.ValidateCustomResource(nil, u, s.validator) {
		add(fieldPath(e), "schema", true, e.ErrorBody(), "change "+fieldPath(e)+" so it passes the new schema before upgrading")
	}
	errs, _ := s.cel.Validate(ctx, nil, s.structural, u, nil, celconfig.RuntimeCELCostBudget)
	for _, e := range errs {
		add(fieldPath(e), "cel", true, e.ErrorBody(), "change the object so the rule holds before upgrading")
	}
	return out
}

func fieldPath(e *field.Error) string {
	if e.Field == "" || e.Field == "<nil>" {
		return "(object)"
	}
	return e.Field
}

// defaulted lists the paths that are set in after but not in before (maps only: a defaulted
// field inside a list item is named by the list).
func defaulted(before, after any, path string) []string {
	bm, ok1 := before.(map[string]any)
	am, ok2 := after.(map[string]any)
	if !ok1 || !ok2 {
		if !reflect.DeepEqual(before, after) && path != "" {
			return []string{path}
		}
		return nil
	}
	var out []string
	for k, av := range am {
		p := k
		if path != "" {
			p = path + "." + k
		}
		bv, had := bm[k]
		if !had {
			out = append(out, p)
			continue
		}
		out = append(out, defaulted(bv, av, p)...)
	}
	sort.Strings(out)
	return out
}
