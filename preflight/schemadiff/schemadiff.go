// Package schemadiff compares two sets of Nexo CRDs (two releases, a release and a cluster) and
// classifies every change the way an upgrade is decided: breaking, risky or safe, each with the
// migration it needs and the rollback constraint it creates. Rule names follow
// sigs.k8s.io/crdify's where it has one (docs/upgrade.md, "Schema changes").
package schemadiff

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/nexo-io/nexo-edge/catalog"
)

// Severity says what a change does to an upgrade.
type Severity string

const (
	// Breaking: live objects or clients that were valid may be rejected, or data lost.
	Breaking Severity = "breaking"
	// Risky: valid objects stay valid, but their meaning or next write may change; check them.
	Risky Severity = "risky"
	// Safe: nothing that worked stops working on upgrade.
	Safe Severity = "safe"
)

// Change is one classified difference.
type Change struct {
	Kind    string `json:"kind"`
	Version string `json:"version,omitempty"`
	// Path is the field, from the object root (spec.upstream.address; [*] an array item, {*} a
	// map value); empty for a change of the whole kind.
	Path     string   `json:"path,omitempty"`
	Rule     string   `json:"rule"`
	Change   string   `json:"change"`
	Severity Severity `json:"severity"`
	// Migration is what to do before upgrading; Rollback what the change means for going back.
	Migration string `json:"migration"`
	Rollback  string `json:"rollback"`
}

// Report is the comparison of two CRD sets.
type Report struct {
	Old     string   `json:"old"`
	New     string   `json:"new"`
	Changes []Change `json:"changes"`
}

// Count is the number of changes of a severity.
func (r Report) Count(s Severity) int {
	n := 0
	for _, c := range r.Changes {
		if c.Severity == s {
			n++
		}
	}
	return n
}

// Compare compares the CRDs old and new (by kind) and returns every change, ordered by kind,
// version and path.
func Compare(oldName string, old map[string]*apiextensionsv1.CustomResourceDefinition, newName string, new map[string]*apiextensionsv1.CustomResourceDefinition) Report {
	r := Report{Old: oldName, New: newName, Changes: []Change{}}
	kinds := map[string]bool{}
	for k := range old {
		kinds[k] = true
	}
	for k := range new {
		kinds[k] = true
	}
	for _, kind := range slices.Sorted(maps.Keys(kinds)) {
		o, n := old[kind], new[kind]
		switch {
		case o == nil:
			r.Changes = append(r.Changes, Change{Kind: kind, Rule: "kindAdded", Change: "kind added (" + support(n) + ")", Severity: Safe,
				Migration: "none", Rollback: "going back leaves the CRD installed but unknown to the older operator; its objects stay"})
		case n == nil:
			r.Changes = append(r.Changes, Change{Kind: kind, Rule: "kindRemoved", Change: "kind removed", Severity: Breaking,
				Migration: "delete or move every " + kind + " object, and every reference to it, before upgrading",
				Rollback:  "none once its objects are gone"})
		default:
			r.Changes = append(r.Changes, compareCRD(kind, o, n)...)
		}
	}
	return r
}

// support is the support label of a CRD (reconciled, schema-only).
func support(c *apiextensionsv1.CustomResourceDefinition) string {
	if s := c.Labels[catalog.SupportLabel]; s != "" {
		return s
	}
	return "support unknown"
}

func compareCRD(kind string, o, n *apiextensionsv1.CustomResourceDefinition) []Change {
	var out []Change
	add := func(c Change) { c.Kind = kind; out = append(out, c) }
	if so, sn := support(o), support(n); so != sn {
		c := Change{Rule: "supportChange", Change: "support " + so + " → " + sn}
		if sn == string(catalog.SchemaOnly) {
			c.Severity = Breaking
			c.Migration = "proxies whose pipeline references a " + kind + " stop at their last good revision (UnsupportedReference): remove the references first"
			c.Rollback = "going back restores reconciliation"
		} else {
			c.Severity, c.Migration = Safe, "none"
			c.Rollback = "going back makes references to " + kind + " UnsupportedReference again"
		}
		add(c)
	}
	if o.Spec.Scope != n.Spec.Scope {
		add(Change{Rule: "scope", Change: fmt.Sprintf("scope %s → %s", o.Spec.Scope, n.Spec.Scope), Severity: Breaking,
			Migration: "export every object, delete the CRD, re-create the objects", Rollback: "the same, backwards"})
	}
	newVersions := map[string]*apiextensionsv1.CustomResourceDefinitionVersion{}
	for i := range n.Spec.Versions {
		newVersions[n.Spec.Versions[i].Name] = &n.Spec.Versions[i]
	}
	for i := range o.Spec.Versions {
		ov := &o.Spec.Versions[i]
		nv := newVersions[ov.Name]
		if nv == nil {
			add(Change{Version: ov.Name, Rule: "storedVersionRemoval", Change: "version " + ov.Name + " removed", Severity: Breaking,
				Migration: "migrate every stored object to another version and drop " + ov.Name + " from status.storedVersions first",
				Rollback:  "none: objects written in the new version cannot be read by the old release"})
			continue
		}
		if ov.Served && !nv.Served {
			add(Change{Version: ov.Name, Rule: "servedVersionRemoval", Change: "version " + ov.Name + " no longer served", Severity: Breaking,
				Migration: "move every client (GitOps, the Control Plane) to a served version", Rollback: "going back serves it again"})
		}
		if ov.Schema == nil || nv.Schema == nil || ov.Schema.OpenAPIV3Schema == nil || nv.Schema.OpenAPIV3Schema == nil {
			continue
		}
		for _, c := range compareProps("", ov.Schema.OpenAPIV3Schema, nv.Schema.OpenAPIV3Schema) {
			c.Version = ov.Name
			add(c)
		}
	}
	for _, nv := range n.Spec.Versions {
		if !slices.ContainsFunc(o.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool { return v.Name == nv.Name }) {
			add(Change{Version: nv.Name, Rule: "versionAdded", Change: "version " + nv.Name + " added", Severity: Safe, Migration: "none",
				Rollback: "objects stored as " + nv.Name + " must be migrated back before the old CRD is restored"})
		}
	}
	return out
}

// child joins a path.
func child(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// compareProps compares one schema node and walks its children.
func compareProps(path string, o, n *apiextensionsv1.JSONSchemaProps) []Change {
	var out []Change
	add := func(rule, what string, s Severity, migration, rollback string) {
		out = append(out, Change{Path: path, Rule: rule, Change: what, Severity: s, Migration: migration, Rollback: rollback})
	}
	if o.Type != n.Type {
		add("type", fmt.Sprintf("type %s → %s", orAny(o.Type), orAny(n.Type)), Breaking,
			"rewrite every value of "+pathOrRoot(path)+" as "+orAny(n.Type)+" before upgrading",
			"values written as "+orAny(n.Type)+" are invalid under the old schema")
		return out // the rest of the node is not comparable
	}
	out = append(out, compareEnum(path, o, n)...)
	out = append(out, compareDefault(path, o, n)...)
	out = append(out, compareBounds(path, o, n)...)
	if o.Pattern != n.Pattern {
		switch {
		case o.Pattern == "":
			add("pattern", fmt.Sprintf("pattern %q added", n.Pattern), Risky, "check live values match it (nexoctl preflight --upgrade does)", "none")
		case n.Pattern == "":
			add("pattern", fmt.Sprintf("pattern %q removed", o.Pattern), Safe, "none", fmt.Sprintf("values the old pattern %q refuses are refused again after going back", o.Pattern))
		default:
			add("pattern", fmt.Sprintf("pattern %q → %q", o.Pattern, n.Pattern), Risky, "check live values match it (nexoctl preflight --upgrade does)",
				"values only the new pattern accepts are refused after going back")
		}
	}
	out = append(out, compareCEL(path, o.XValidations, n.XValidations)...)
	// Required fields.
	for _, f := range n.Required {
		if !slices.Contains(o.Required, f) {
			out = append(out, Change{Path: child(path, f), Rule: "required", Change: "new required field", Severity: Breaking,
				Migration: "set " + child(path, f) + " on every object before upgrading (objects without it cannot be updated)",
				Rollback:  "none"})
		}
	}
	for _, f := range o.Required {
		if !slices.Contains(n.Required, f) {
			out = append(out, Change{Path: child(path, f), Rule: "required", Change: "no longer required", Severity: Safe, Migration: "none",
				Rollback: "objects without " + child(path, f) + " are refused after going back"})
		}
	}
	// Properties.
	for _, name := range slices.Sorted(maps.Keys(o.Properties)) {
		op := o.Properties[name]
		np, ok := n.Properties[name]
		p := child(path, name)
		if !ok {
			if n.XPreserveUnknownFields != nil && *n.XPreserveUnknownFields {
				continue
			}
			out = append(out, Change{Path: p, Rule: "existingFieldRemoval", Change: "field removed", Severity: Breaking,
				Migration: "move the data of " + p + " elsewhere: the API server prunes it from every object on its next write",
				Rollback:  "pruned data does not come back"})
			continue
		}
		out = append(out, compareProps(p, &op, &np)...)
	}
	for _, name := range slices.Sorted(maps.Keys(n.Properties)) {
		if _, ok := o.Properties[name]; !ok {
			p := child(path, name)
			out = append(out, Change{Path: p, Rule: "fieldAdded", Change: "field added", Severity: Safe, Migration: "none",
				Rollback: "going back prunes " + p + " from every object on its next write"})
		}
	}
	if o.Items != nil && n.Items != nil && o.Items.Schema != nil && n.Items.Schema != nil {
		out = append(out, compareProps(path+"[*]", o.Items.Schema, n.Items.Schema)...)
	}
	if o.AdditionalProperties != nil && n.AdditionalProperties != nil && o.AdditionalProperties.Schema != nil && n.AdditionalProperties.Schema != nil {
		out = append(out, compareProps(path+"{*}", o.AdditionalProperties.Schema, n.AdditionalProperties.Schema)...)
	}
	return out
}

func orAny(t string) string {
	if t == "" {
		return "any"
	}
	return t
}

func pathOrRoot(p string) string {
	if p == "" {
		return "the object"
	}
	return p
}

func enumValues(p *apiextensionsv1.JSONSchemaProps) []string {
	var out []string
	for _, e := range p.Enum {
		out = append(out, string(e.Raw))
	}
	sort.Strings(out)
	return out
}

func compareEnum(path string, o, n *apiextensionsv1.JSONSchemaProps) []Change {
	ov, nv := enumValues(o), enumValues(n)
	if slices.Equal(ov, nv) {
		return nil
	}
	var removed, added []string
	for _, v := range ov {
		if !slices.Contains(nv, v) {
			removed = append(removed, v)
		}
	}
	for _, v := range nv {
		if !slices.Contains(ov, v) {
			added = append(added, v)
		}
	}
	c := Change{Path: path, Rule: "enum"}
	switch {
	case len(ov) == 0:
		c.Change, c.Severity = "enum added: "+strings.Join(nv, ", "), Breaking
		c.Migration, c.Rollback = "change every value of "+path+" to one of "+strings.Join(nv, ", "), "none"
	case len(nv) == 0:
		c.Change, c.Severity = "enum removed (any value)", Safe
		c.Migration, c.Rollback = "none", "values outside "+strings.Join(ov, ", ")+" are refused after going back"
	case len(removed) > 0:
		c.Change, c.Severity = "enum narrowed: removed "+strings.Join(removed, ", "), Breaking
		c.Migration, c.Rollback = "change every "+path+" that is "+strings.Join(removed, " or ")+" before upgrading", "none"
		if len(added) > 0 {
			c.Change += "; added " + strings.Join(added, ", ")
		}
	default:
		c.Change, c.Severity = "enum widened: added "+strings.Join(added, ", "), Safe
		c.Migration, c.Rollback = "none", "objects using "+strings.Join(added, " or ")+" are refused after going back"
	}
	return []Change{c}
}

func compareDefault(path string, o, n *apiextensionsv1.JSONSchemaProps) []Change {
	raw := func(p *apiextensionsv1.JSONSchemaProps) string {
		if p.Default == nil {
			return ""
		}
		return string(p.Default.Raw)
	}
	od, nd := raw(o), raw(n)
	if od == nd {
		return nil
	}
	c := Change{Path: path, Rule: "default", Severity: Risky,
		Migration: "objects that leave " + path + " unset read the new default: set it explicitly to keep today's behaviour (proxies using it may roll)"}
	switch {
	case od == "":
		c.Change, c.Rollback = "default "+nd+" added", "objects written after the upgrade keep "+nd+" stored"
	case nd == "":
		c.Change, c.Rollback = "default "+od+" removed", "none"
		c.Migration = "objects that leave " + path + " unset no longer get " + od + ": set it explicitly"
	default:
		c.Change, c.Rollback = "default "+od+" → "+nd, "objects written after the upgrade keep "+nd+" stored"
	}
	return []Change{c}
}

// bound is one of the numeric limits of a schema node; max says whether lowering it narrows.
type bound struct {
	rule string
	max  bool
	get  func(*apiextensionsv1.JSONSchemaProps) (float64, bool)
}

func intBound(f func(*apiextensionsv1.JSONSchemaProps) *int64) func(*apiextensionsv1.JSONSchemaProps) (float64, bool) {
	return func(p *apiextensionsv1.JSONSchemaProps) (float64, bool) {
		if v := f(p); v != nil {
			return float64(*v), true
		}
		return 0, false
	}
}

var bounds = []bound{
	{"maximum", true, func(p *apiextensionsv1.JSONSchemaProps) (float64, bool) {
		if p.Maximum == nil {
			return 0, false
		}
		return *p.Maximum, true
	}},
	{"minimum", false, func(p *apiextensionsv1.JSONSchemaProps) (float64, bool) {
		if p.Minimum == nil {
			return 0, false
		}
		return *p.Minimum, true
	}},
	{"maxLength", true, intBound(func(p *apiextensionsv1.JSONSchemaProps) *int64 { return p.MaxLength })},
	{"minLength", false, intBound(func(p *apiextensionsv1.JSONSchemaProps) *int64 { return p.MinLength })},
	{"maxItems", true, intBound(func(p *apiextensionsv1.JSONSchemaProps) *int64 { return p.MaxItems })},
	{"minItems", false, intBound(func(p *apiextensionsv1.JSONSchemaProps) *int64 { return p.MinItems })},
	{"maxProperties", true, intBound(func(p *apiextensionsv1.JSONSchemaProps) *int64 { return p.MaxProperties })},
	{"minProperties", false, intBound(func(p *apiextensionsv1.JSONSchemaProps) *int64 { return p.MinProperties })},
}

func compareBounds(path string, o, n *apiextensionsv1.JSONSchemaProps) []Change {
	var out []Change
	for _, b := range bounds {
		ov, oset := b.get(o)
		nv, nset := b.get(n)
		if oset == nset && ov == nv {
			continue
		}
		narrowed := nset && (!oset || (b.max && nv < ov) || (!b.max && nv > ov))
		c := Change{Path: path, Rule: b.rule}
		switch {
		case !oset:
			c.Change = fmt.Sprintf("%s %v added", b.rule, nv)
		case !nset:
			c.Change = fmt.Sprintf("%s %v removed", b.rule, ov)
		case b.max && nv < ov:
			c.Change = fmt.Sprintf("%s decreased %v → %v", b.rule, ov, nv)
		case !b.max && nv > ov:
			c.Change = fmt.Sprintf("%s increased %v → %v", b.rule, ov, nv)
		default:
			c.Change = fmt.Sprintf("%s %v → %v", b.rule, ov, nv)
		}
		if narrowed {
			c.Severity = Breaking
			c.Migration = "bring every " + pathOrRoot(path) + " within the new " + b.rule + " before upgrading (nexoctl preflight --upgrade lists them)"
			c.Rollback = "none"
		} else {
			c.Severity, c.Migration = Safe, "none"
			c.Rollback = "values outside the old " + b.rule + " are refused after going back"
		}
		out = append(out, c)
	}
	return out
}

func compareCEL(path string, o, n apiextensionsv1.ValidationRules) []Change {
	key := func(r apiextensionsv1.ValidationRule) string { b, _ := json.Marshal(r); return string(b) }
	byRule := func(rs apiextensionsv1.ValidationRules) map[string]apiextensionsv1.ValidationRule {
		m := map[string]apiextensionsv1.ValidationRule{}
		for _, r := range rs {
			m[r.Rule] = r
		}
		return m
	}
	om, nm := byRule(o), byRule(n)
	var out []Change
	for _, rule := range slices.Sorted(maps.Keys(nm)) {
		or, had := om[rule]
		switch {
		case !had:
			out = append(out, Change{Path: path, Rule: "celRule", Change: fmt.Sprintf("CEL rule added: %s", rule), Severity: Risky,
				Migration: "check live objects satisfy it (nexoctl preflight --upgrade does); an object that does not cannot be updated",
				Rollback:  "none"})
		case key(or) != key(nm[rule]):
			out = append(out, Change{Path: path, Rule: "celRule", Change: fmt.Sprintf("CEL rule changed (message, reason or field path): %s", rule), Severity: Safe,
				Migration: "none", Rollback: "none"})
		}
	}
	for _, rule := range slices.Sorted(maps.Keys(om)) {
		if _, ok := nm[rule]; !ok {
			out = append(out, Change{Path: path, Rule: "celRule", Change: fmt.Sprintf("CEL rule removed: %s", rule), Severity: Safe,
				Migration: "none", Rollback: "objects that break it are refused after going back"})
		}
	}
	return out
}
