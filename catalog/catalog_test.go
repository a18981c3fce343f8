package catalog_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/catalog"
)

// loadCRDs reads the generated CRDs, keyed by kind.
func loadCRDs(t *testing.T) map[string]*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	files, err := filepath.Glob("../config/crd/bases/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no generated CRDs (%v); run make manifests", err)
	}
	out := map[string]*apiextensionsv1.CustomResourceDefinition{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(raw, crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if _, dup := out[crd.Spec.Names.Kind]; dup {
			t.Fatalf("two CRDs for kind %s", crd.Spec.Names.Kind)
		}
		out[crd.Spec.Names.Kind] = crd
	}
	return out
}

func TestCatalogShape(t *testing.T) {
	if got := len(catalog.Kinds); got != 24 {
		t.Fatalf("catalog has %d kinds, want 24", got)
	}
	if r, s := len(catalog.WithSupport(catalog.Reconciled)), len(catalog.WithSupport(catalog.SchemaOnly)); r != 18 || s != 6 {
		t.Fatalf("catalog has %d reconciled and %d schema-only kinds, want 18 and 6", r, s)
	}
	plurals, shorts := map[string]bool{}, map[string]bool{}
	for _, k := range catalog.Kinds {
		if plurals[k.Plural] || shorts[k.ShortName] {
			t.Errorf("%s: plural %q or short name %q repeated", k.Kind, k.Plural, k.ShortName)
		}
		plurals[k.Plural], shorts[k.ShortName] = true, true
		if (k.Role == catalog.RoleStep || k.Role == catalog.RoleRouter || k.Role == catalog.RoleObservability) && len(k.Slots) == 0 {
			t.Errorf("%s: role %s needs at least one slot", k.Kind, k.Role)
		}
	}
}

// TestCRDsMatchCatalog fails when a generated CRD disagrees with the catalog in any way the
// catalog decides: kind set, plural, short name, category, scope, version, status subresource,
// support label and keep annotation.
func TestCRDsMatchCatalog(t *testing.T) {
	crds := loadCRDs(t)
	if len(crds) != len(catalog.Kinds) {
		t.Errorf("%d CRDs generated, catalog lists %d kinds", len(crds), len(catalog.Kinds))
	}
	for _, k := range catalog.Kinds {
		crd, ok := crds[k.Kind]
		if !ok {
			t.Errorf("catalog kind %s has no CRD", k.Kind)
			continue
		}
		n := crd.Spec.Names
		if crd.Name != k.CRDName() || n.Plural != k.Plural {
			t.Errorf("%s: CRD %s plural %s, catalog says %s", k.Kind, crd.Name, n.Plural, k.CRDName())
		}
		if !slices.Equal(n.ShortNames, []string{k.ShortName}) {
			t.Errorf("%s: short names %v, catalog says [%s]", k.Kind, n.ShortNames, k.ShortName)
		}
		if !slices.Equal(n.Categories, []string{catalog.CategoryNexo}) {
			t.Errorf("%s: categories %v, want [nexo]", k.Kind, n.Categories)
		}
		if crd.Spec.Group != catalog.Group || crd.Spec.Scope != apiextensionsv1.NamespaceScoped {
			t.Errorf("%s: group %s scope %s", k.Kind, crd.Spec.Group, crd.Spec.Scope)
		}
		if len(crd.Spec.Versions) != 1 || crd.Spec.Versions[0].Name != catalog.Version ||
			!crd.Spec.Versions[0].Served || !crd.Spec.Versions[0].Storage {
			t.Errorf("%s: must serve and store exactly %s", k.Kind, catalog.Version)
		} else if sr := crd.Spec.Versions[0].Subresources; sr == nil || sr.Status == nil {
			t.Errorf("%s: no status subresource", k.Kind)
		}
		if got := crd.Labels[catalog.SupportLabel]; got != string(k.Support) {
			t.Errorf("%s: label %s=%q, catalog says %q", k.Kind, catalog.SupportLabel, got, k.Support)
		}
		if got := crd.Annotations[catalog.ResourcePolicyKey]; got != catalog.ResourcePolicyKeep {
			t.Errorf("%s: annotation %s=%q, want keep", k.Kind, catalog.ResourcePolicyKey, got)
		}
	}
}

// TestSlotEnumsMatchCatalog checks the literal kind enums on every reference field against
// catalog.InSlot, so a slot change in the catalog cannot silently leave the API behind.
func TestSlotEnumsMatchCatalog(t *testing.T) {
	crds := loadCRDs(t)
	spec := func(kind string) apiextensionsv1.JSONSchemaProps {
		return crds[kind].Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
	}
	enum := func(p apiextensionsv1.JSONSchemaProps) []string {
		var out []string
		for _, e := range p.Enum {
			var s string
			if err := yaml.Unmarshal(e.Raw, &s); err != nil {
				t.Fatal(err)
			}
			out = append(out, s)
		}
		slices.Sort(out)
		return out
	}
	want := func(s catalog.Slot) []string { out := catalog.InSlot(s); slices.Sort(out); return out }
	pipe := spec("NexoPipeline")
	steps := append(append(catalog.InSlot(catalog.SlotRequest), catalog.InSlot(catalog.SlotResponse)...), catalog.InSlot(catalog.SlotConnection)...)
	slices.Sort(steps)
	steps = slices.Compact(steps)
	cases := []struct {
		field string
		got   apiextensionsv1.JSONSchemaProps
		want  []string
	}{
		{"NexoPipeline.spec.router.kind", pipe.Properties["router"].Properties["kind"], want(catalog.SlotRouter)},
		{"NexoPipeline.spec.request[].kind", pipe.Properties["request"].Items.Schema.Properties["kind"], want(catalog.SlotRequest)},
		{"NexoPipeline.spec.response[].kind", pipe.Properties["response"].Items.Schema.Properties["kind"], want(catalog.SlotResponse)},
		{"NexoPipeline.spec.connection[].kind", pipe.Properties["connection"].Items.Schema.Properties["kind"], want(catalog.SlotConnection)},
		{"NexoConnectionPipeline.spec.steps[].kind", spec("NexoConnectionPipeline").Properties["steps"].Items.Schema.Properties["kind"], want(catalog.SlotConnection)},
		{"NexoProxy.spec.observabilityRefs[].kind", spec("NexoProxy").Properties["observabilityRefs"].Items.Schema.Properties["kind"], want(catalog.SlotObservability)},
		{"NexoDeploymentProfile.spec.stepCatalog[].kind", spec("NexoDeploymentProfile").Properties["stepCatalog"].Items.Schema.Properties["kind"], steps},
	}
	for _, c := range cases {
		if got := enum(c.got); !slices.Equal(got, c.want) {
			t.Errorf("%s enum %v, catalog says %v", c.field, got, c.want)
		}
	}
}

// TestSchemeMatchesCatalog checks that api/v1alpha1 registers exactly the catalog's kinds.
func TestSchemeMatchesCatalog(t *testing.T) {
	s := runtime.NewScheme()
	if err := nexov1alpha1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	var registered []string
	for gvk := range s.AllKnownTypes() {
		if gvk.GroupVersion() == nexov1alpha1.GroupVersion && !isListOrOption(gvk.Kind) {
			registered = append(registered, gvk.Kind)
		}
	}
	slices.Sort(registered)
	names := catalog.Names()
	slices.Sort(names)
	if !slices.Equal(registered, names) {
		t.Errorf("scheme registers %v, catalog lists %v", registered, names)
	}
}

func isListOrOption(kind string) bool {
	return len(kind) > 4 && kind[len(kind)-4:] == "List" ||
		slices.Contains([]string{"WatchEvent", "ListOptions", "GetOptions", "DeleteOptions", "CreateOptions", "UpdateOptions", "PatchOptions"}, kind)
}

// TestOneSamplePerKind checks config/samples holds exactly one object of every catalog kind.
func TestOneSamplePerKind(t *testing.T) {
	files, _ := filepath.Glob("../config/samples/nexo.io_v1alpha1_*.yaml")
	seen := map[string]string{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var obj struct {
			Kind string `json:"kind"`
		}
		if err := yaml.Unmarshal(raw, &obj); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if prev, dup := seen[obj.Kind]; dup {
			t.Errorf("%s and %s are both %s samples", prev, f, obj.Kind)
		}
		seen[obj.Kind] = f
	}
	for _, k := range catalog.Kinds {
		if _, ok := seen[k.Kind]; !ok {
			t.Errorf("no sample for %s in config/samples", k.Kind)
		}
	}
}

// TestOperatorRBACMatchesCatalog checks the literal resource list of the RBAC markers against
// the catalog: the operator may read exactly the reconciled kinds and write their status.
func TestOperatorRBACMatchesCatalog(t *testing.T) {
	raw, err := os.ReadFile("../config/rbac/role.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var want, wantStatus []string
	for _, k := range catalog.Kinds {
		if k.Support == catalog.Reconciled {
			want = append(want, k.Plural)
			wantStatus = append(wantStatus, k.Plural+"/status")
		}
	}
	slices.Sort(want)
	slices.Sort(wantStatus)
	for _, doc := range strings.Split(string(raw), "\n---") {
		var role struct {
			Kind  string `json:"kind"`
			Rules []struct {
				APIGroups []string `json:"apiGroups"`
				Resources []string `json:"resources"`
			} `json:"rules"`
		}
		if err := yaml.Unmarshal([]byte(doc), &role); err != nil || role.Kind != "ClusterRole" {
			continue
		}
		var got, gotStatus []string
		for _, r := range role.Rules {
			if slices.Contains(r.APIGroups, catalog.Group) {
				for _, res := range r.Resources {
					if strings.HasSuffix(res, "/status") {
						gotStatus = append(gotStatus, res)
					} else {
						got = append(got, res)
					}
				}
			}
		}
		slices.Sort(got)
		slices.Sort(gotStatus)
		if !slices.Equal(got, want) || !slices.Equal(gotStatus, wantStatus) {
			t.Errorf("operator RBAC on nexo.io:\n  %v\n  %v\nwant the reconciled kinds:\n  %v\n  %v", got, gotStatus, want, wantStatus)
		}
		return
	}
	t.Fatal("no ClusterRole in config/rbac/role.yaml")
}
