package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/blang/semver/v4"
	"github.com/operator-framework/api/pkg/lib/version"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/nexo-io/nexo-edge/catalog"
	"github.com/nexo-io/nexo-edge/contract/wire"
	"github.com/nexo-io/nexo-edge/controllers/render"
)

// buildCSV assembles the ClusterServiceVersion from config/ (both Deployments and their rules),
// the catalog (owned CRDs, descriptors, description) and render.Children (what a NexoProxy owns).
func buildCSV(rules operatorRules) (*operatorsv1alpha1.ClusterServiceVersion, error) {
	edge, err := buildEdge()
	if err != nil {
		return nil, err
	}
	opDep, err := deployment("config/operator/operator.yaml")
	if err != nil {
		return nil, err
	}
	// OLM tells the operator which namespaces it serves through this annotation.
	c := &opDep.Spec.Template.Spec.Containers[0]
	c.Env = append(c.Env, corev1EnvFromAnnotation(wire.WatchNamespacesEnv, "metadata.annotations['olm.targetNamespaces']"))
	// A bundle cannot carry the admission policy; the operator applies it (docs/security.md).
	c.Args = append(c.Args, "--ensure-admission-policy")
	// Authenticated metrics: TokenReview and SubjectAccessReview (config/rbac/metrics_auth.yaml).
	metricsAuth, err := rulesOf("config/rbac/metrics_auth.yaml", "ClusterRole")
	if err != nil {
		return nil, err
	}
	mgrDep, err := deployment("config/manager/manager.yaml")
	if err != nil {
		return nil, err
	}
	// The proxy image released with the bundle, as a plain value the Subscription's config.env
	// replaces (OLM's related-image convention, so a mirror for disconnected installs finds it).
	for i, e := range mgrDep.Spec.Template.Spec.Containers[0].Env {
		if e.Name == "NEXO_PROXY_IMAGE" {
			mgrDep.Spec.Template.Spec.Containers[0].Env[i] = corev1.EnvVar{Name: e.Name, Value: catalog.DefaultProxyImage}
		}
	}
	// The Manager serves the same namespaces as the operator: where OLM grants it rights.
	mgrC := &mgrDep.Spec.Template.Spec.Containers[0]
	mgrC.Env = append(mgrC.Env, corev1EnvFromAnnotation(wire.WatchNamespacesEnv, "metadata.annotations['olm.targetNamespaces']"))
	mgrCluster, err := rulesOf("config/manager/manager.yaml", "ClusterRole")
	if err != nil {
		return nil, err
	}
	mgrRelease, err := rulesOf("config/manager/manager.yaml", "Role")
	if err != nil {
		return nil, err
	}
	// Its writes: OLM grants them in the target namespaces, as every namespaced permission; the
	// deploy limit inside them is the Manager's and the admission policy's (docs/rbac.md, OLM).
	mgrDeploy, err := namedRules("config/manager/manager.yaml", "ClusterRole", "nexo-manager-deploy")
	if err != nil {
		return nil, err
	}
	policyRules, err := admissionPolicyRules()
	if err != nil {
		return nil, err
	}
	opNamespaced, opCluster, err := splitByScope(slices.Concat(rules.workload, rules.operatorNamespace, policyRules, metricsAuth))
	if err != nil {
		return nil, err
	}
	// The Manager's metrics are authenticated like the operator's (TokenReview, SubjectAccessReview).
	mgrNamespaced, mgrClusterScoped, err := splitByScope(slices.Concat(mgrDeploy, mgrCluster, mgrRelease, metricsAuth))
	if err != nil {
		return nil, err
	}
	examples, err := almExamples()
	if err != nil {
		return nil, err
	}
	logo, err := icon()
	if err != nil {
		return nil, err
	}
	description, err := execute("csv-description.md", map[string]string{"Summary": catalog.Summary()})
	if err != nil {
		return nil, err
	}
	var owned []operatorsv1alpha1.CRDDescription
	for _, k := range catalog.Kinds {
		d := operatorsv1alpha1.CRDDescription{
			Name: k.CRDName(), Version: catalog.Version, Kind: k.Kind,
			DisplayName: displayName(k.Kind), Description: k.Description,
		}
		if k.Support == catalog.SchemaOnly {
			d.Description += " Schema only in " + catalog.BuildVersion + ": the operator does not reconcile this kind; a reference to it reports UnsupportedReference."
		}
		d.Resources = kindResources(k)
		switch k.Kind {
		case "NexoProxy":
			d.SpecDescriptors = []operatorsv1alpha1.SpecDescriptor{
				{Path: "pipelineRef.name", DisplayName: "Pipeline", Description: "The NexoPipeline this proxy runs.", XDescriptors: []string{"urn:alm:descriptor:io.kubernetes:nexo.io:v1alpha1:NexoPipeline"}},
				{Path: "upstream.address", DisplayName: "Upstream address", Description: "MongoDB endpoint, host:port.", XDescriptors: []string{"urn:alm:descriptor:com.tectonic.ui:text"}},
				{Path: "profileRef.name", DisplayName: "Deployment profile", XDescriptors: []string{"urn:alm:descriptor:io.kubernetes:nexo.io:v1alpha1:NexoDeploymentProfile"}},
				{Path: "licenseRef.name", DisplayName: "License", XDescriptors: []string{"urn:alm:descriptor:io.kubernetes:nexo.io:v1alpha1:NexoLicense"}},
				{Path: "replicas", DisplayName: "Replicas", XDescriptors: []string{"urn:alm:descriptor:com.tectonic.ui:podCount"}},
			}
			d.StatusDescriptors = []operatorsv1alpha1.StatusDescriptor{
				{Path: "phase", DisplayName: "Phase", XDescriptors: []string{"urn:alm:descriptor:io.kubernetes.phase"}},
				{Path: "conditions", DisplayName: "Conditions", XDescriptors: []string{"urn:alm:descriptor:io.kubernetes.conditions"}},
				{Path: "readyReplicas", DisplayName: "Ready replicas", XDescriptors: []string{"urn:alm:descriptor:com.tectonic.ui:podCount"}},
				{Path: "graphRevision", DisplayName: "Graph revision", XDescriptors: []string{"urn:alm:descriptor:text"}},
				{Path: "configHash", DisplayName: "Config hash", XDescriptors: []string{"urn:alm:descriptor:text"}},
			}
		case "NexoPipeline":
			d.SpecDescriptors = []operatorsv1alpha1.SpecDescriptor{
				{Path: "router", DisplayName: "Router", Description: "Router kind and name."},
				{Path: "request", DisplayName: "Request steps", Description: "Ordered request steps."},
				{Path: "response", DisplayName: "Response steps", Description: "Ordered response steps."},
				{Path: "connection", DisplayName: "Connection steps", Description: "Connection steps."},
			}
			d.StatusDescriptors = []operatorsv1alpha1.StatusDescriptor{
				{Path: "conditions", DisplayName: "Conditions", XDescriptors: []string{"urn:alm:descriptor:io.kubernetes.conditions"}},
			}
		}
		if len(d.SpecDescriptors) == 0 {
			// Every other kind: one descriptor per top-level spec field, from its CRD schema.
			if d.SpecDescriptors, err = specDescriptors(k); err != nil {
				return nil, err
			}
		}
		if len(d.StatusDescriptors) == 0 && k.Support == catalog.Reconciled {
			d.StatusDescriptors = []operatorsv1alpha1.StatusDescriptor{
				{Path: "conditions", DisplayName: "Conditions", XDescriptors: []string{"urn:alm:descriptor:io.kubernetes.conditions"}},
			}
		}
		owned = append(owned, d)
	}
	csv := &operatorsv1alpha1.ClusterServiceVersion{
		TypeMeta: metav1.TypeMeta{APIVersion: "operators.coreos.com/v1alpha1", Kind: "ClusterServiceVersion"},
		ObjectMeta: metav1.ObjectMeta{
			Name: packageName + ".v" + catalog.BuildVersion,
			// The platforms make images builds (hack/release): OperatorHub filters on these.
			Labels: map[string]string{
				"operatorframework.io/arch.amd64": "supported",
				"operatorframework.io/arch.arm64": "supported",
				"operatorframework.io/os.linux":   "supported",
			},
			Annotations: map[string]string{
				"alm-examples":   examples,
				"capabilities":   "Basic Install",
				"categories":     "Database,Networking,Security",
				"containerImage": operatorImage,
				"createdAt":      createdAt,
				"description":    "Runs and manages Nexo Edge MongoDB-protocol proxies from a signed pipeline graph.",
				"repository":     "https://github.com/nexo-io/nexo-edge",
				"support":        "Nexo",
				"operatorframework.io/suggested-namespace":         "nexo-system",
				"operators.operatorframework.io/internal-objects":  internalObjects(),
				"operators.openshift.io/valid-subscription":        `["Nexo Edge subscription"]`,
				"features.operators.openshift.io/disconnected":     "false", // the Manager needs its Control Plane (docs/release.md, "Disconnected clusters")
				"features.operators.openshift.io/fips-compliant":   "false",
				"features.operators.openshift.io/proxy-aware":      "true", // the Manager honours HTTPS_PROXY/NO_PROXY (Go's http.ProxyFromEnvironment)
				"features.operators.openshift.io/tls-profiles":     "false",
				"features.operators.openshift.io/token-auth-aws":   "false",
				"features.operators.openshift.io/token-auth-azure": "false",
				"features.operators.openshift.io/token-auth-gcp":   "false",
				"features.operators.openshift.io/cnf":              "false",
				"features.operators.openshift.io/cni":              "false",
				"features.operators.openshift.io/csi":              "false",
			},
		},
		Spec: operatorsv1alpha1.ClusterServiceVersionSpec{
			DisplayName:    "Nexo Edge",
			Replaces:       edge.Replaces,
			Description:    strings.TrimSpace(string(description)),
			Version:        version.OperatorVersion{Version: semver.MustParse(catalog.BuildVersion)},
			Maturity:       "alpha",
			MinKubeVersion: catalog.MinKubernetesVersion,
			Keywords:       []string{"mongodb", "proxy", "pii", "multi-tenant", "rate-limit"},
			Maintainers:    []operatorsv1alpha1.Maintainer{{Name: "Nexo Edge", Email: "edge@nexo.io"}},
			Provider:       operatorsv1alpha1.AppLink{Name: "Nexo", URL: "https://nexo.io"},
			Links: []operatorsv1alpha1.AppLink{
				{Name: "Documentation", URL: "https://github.com/nexo-io/nexo-edge/tree/main/docs"},
				{Name: "Source", URL: "https://github.com/nexo-io/nexo-edge"},
			},
			Icon: []operatorsv1alpha1.Icon{{Data: logo, MediaType: "image/svg+xml"}},
			InstallModes: []operatorsv1alpha1.InstallMode{
				{Type: operatorsv1alpha1.InstallModeTypeOwnNamespace, Supported: true},
				{Type: operatorsv1alpha1.InstallModeTypeSingleNamespace, Supported: true},
				{Type: operatorsv1alpha1.InstallModeTypeMultiNamespace, Supported: true},
				{Type: operatorsv1alpha1.InstallModeTypeAllNamespaces, Supported: true},
			},
			InstallStrategy: operatorsv1alpha1.NamedInstallStrategy{
				StrategyName: operatorsv1alpha1.InstallStrategyNameDeployment,
				StrategySpec: operatorsv1alpha1.StrategyDetailsDeployment{
					DeploymentSpecs: []operatorsv1alpha1.StrategyDeploymentSpec{
						{Name: opDep.Name, Label: opDep.Labels, Spec: opDep.Spec},
						{Name: mgrDep.Name, Label: mgrDep.Labels, Spec: mgrDep.Spec},
					},
					// OLM binds clusterPermissions cluster-wide in every install mode, and permissions
					// in the operator namespace plus each target namespace (cluster-wide only under an
					// AllNamespaces OperatorGroup): every namespaced rule is a permission, so an
					// OperatorGroup that targets namespaces grants nothing beyond them (docs/rbac.md).
					// The Secret writes (pull-Secret copies) are in neither: under AllNamespaces OLM would
					// grant them cluster-wide. The bundle ships nexo-operator-secret-copies for an admin to
					// bind per namespace.
					ClusterPermissions: []operatorsv1alpha1.StrategyDeploymentPermissions{
						{ServiceAccountName: "nexo-operator", Rules: opCluster},
						{ServiceAccountName: "nexo-manager", Rules: mgrClusterScoped},
					},
					Permissions: []operatorsv1alpha1.StrategyDeploymentPermissions{
						{ServiceAccountName: "nexo-operator", Rules: opNamespaced},
						{ServiceAccountName: "nexo-manager", Rules: mgrNamespaced},
					},
				},
			},
			CustomResourceDefinitions: operatorsv1alpha1.CustomResourceDefinitions{Owned: owned},
			RelatedImages:             relatedImages(),
		},
	}
	if edge.SkipRange != "" {
		csv.Annotations["olm.skipRange"] = edge.SkipRange
	}
	return csv, nil
}

// almExamples is the JSON array of the samples, in catalog order.
func almExamples() (string, error) {
	var objs []any
	for _, k := range catalog.Kinds {
		raw, err := os.ReadFile(filepath.Join("config", "samples", "nexo.io_v1alpha1_"+strings.ToLower(k.Kind)+".yaml"))
		if err != nil {
			return "", err
		}
		var obj any
		if err := yaml.Unmarshal(raw, &obj); err != nil {
			return "", err
		}
		objs = append(objs, obj)
	}
	out, err := json.MarshalIndent(objs, "", "  ")
	return string(out), err
}

// internalObjects is the JSON list of the schema-only kinds' CRD names, for the
// operators.operatorframework.io/internal-objects annotation: the console lists them as internal
// and offers no "Create" for them.
func internalObjects() string {
	var names []string
	for _, k := range catalog.Kinds {
		if k.Support == catalog.SchemaOnly {
			names = append(names, k.CRDName())
		}
	}
	out, _ := json.Marshal(names)
	return string(out)
}

// relatedImages are the images the bundle runs and the proxy image released with it (the
// Manager's NEXO_PROXY_IMAGE), so a mirror for a disconnected cluster copies it too. make release
// pins each by digest; the proxy image is published by the proxy team first (docs/release.md).
// A proxy runs the images its NexoDeploymentProfile approves, which may be others.
func relatedImages() []operatorsv1alpha1.RelatedImage {
	return []operatorsv1alpha1.RelatedImage{
		{Name: "nexo-operator", Image: operatorImage},
		{Name: "nexo-manager", Image: managerImage},
		{Name: "nexo-proxy", Image: catalog.DefaultProxyImage},
	}
}

// openShiftVersions is the oldest OpenShift whose Kubernetes meets catalog.MinKubernetesVersion: OpenShift
// 4.N runs Kubernetes 1.(N+13) (4.15 runs 1.28, 4.17 runs 1.30).
func openShiftVersions() string {
	v := semver.MustParse(catalog.MinKubernetesVersion)
	return fmt.Sprintf("v4.%d", v.Minor-13)
}

// specDescriptors describes each top-level spec field of a kind for the OperatorHub form, from
// the CRD schema (its description's first sentence, a widget by type): one source, no drift.
func specDescriptors(k catalog.Kind) ([]operatorsv1alpha1.SpecDescriptor, error) {
	raw, err := os.ReadFile(filepath.Join("config", "crd", "bases", catalog.Group+"_"+k.Plural+".yaml"))
	if err != nil {
		return nil, err
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		return nil, err
	}
	var spec apiextensionsv1.JSONSchemaProps
	for _, v := range crd.Spec.Versions {
		if v.Name == catalog.Version && v.Schema != nil && v.Schema.OpenAPIV3Schema != nil {
			spec = v.Schema.OpenAPIV3Schema.Properties["spec"]
		}
	}
	names := make([]string, 0, len(spec.Properties))
	for n := range spec.Properties {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []operatorsv1alpha1.SpecDescriptor
	for _, n := range names {
		p := spec.Properties[n]
		desc := p.Description
		if i := strings.Index(desc, ". "); i >= 0 {
			desc = desc[:i+1]
		}
		desc = strings.ReplaceAll(desc, "\n", " ")
		var x string
		switch {
		case strings.HasSuffix(n, "SecretRef"):
			x = "urn:alm:descriptor:io.kubernetes:Secret"
		case p.Type == "boolean":
			x = "urn:alm:descriptor:com.tectonic.ui:booleanSwitch"
		case p.Type == "integer" || p.Type == "number":
			x = "urn:alm:descriptor:com.tectonic.ui:number"
		case p.Type == "string" && len(p.Enum) > 0:
			x = "urn:alm:descriptor:com.tectonic.ui:select:" + strings.Trim(string(p.Enum[0].Raw), `"`)
		case p.Type == "string":
			x = "urn:alm:descriptor:com.tectonic.ui:text"
		case p.Type == "array":
			x = "urn:alm:descriptor:com.tectonic.ui:arrayFieldGroup:" + n
		default:
			x = "urn:alm:descriptor:com.tectonic.ui:fieldGroup:" + n
		}
		out = append(out, operatorsv1alpha1.SpecDescriptor{Path: n, DisplayName: displayName(strings.ToUpper(n[:1]) + n[1:]), Description: desc, XDescriptors: []string{x}})
	}
	return out, nil
}

// displayName splits NexoPIIMasking into "Nexo PII Masking".
func displayName(kind string) string {
	var b strings.Builder
	for i, r := range kind {
		if i > 0 && r >= 'A' && r <= 'Z' {
			prev := kind[i-1]
			nextLower := i+1 < len(kind) && kind[i+1] >= 'a' && kind[i+1] <= 'z'
			if prev >= 'a' && prev <= 'z' || nextLower {
				b.WriteByte(' ')
			}
		}
		b.WriteRune(r)
	}
	return b.String()
}

// icon is the Nexo Edge logo (templates/icon.svg), base64, as the CSV carries it.
func icon() (string, error) {
	raw, err := templateFiles.ReadFile("templates/icon.svg")
	return base64.StdEncoding.EncodeToString(raw), err
}

func corev1EnvFromAnnotation(name, path string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
}

// kindResources are the objects each kind shapes, for the CSV's resources (the console's
// Resources tab and scorecard's olm-crds-have-resources): a NexoProxy's children, which it owns;
// the Deployment and pull-Secret copies a profile shapes; the config ConfigMaps a pipeline, router
// or step is rendered into and the Deployments a change to it rolls; the NexoProxies a license
// admits; for a schema-only kind, the NexoProxy that reports UnsupportedReference when it is
// referenced (docs/operator.md, "What each kind shapes").
func kindResources(k catalog.Kind) []operatorsv1alpha1.APIResourceReference {
	proxy := operatorsv1alpha1.APIResourceReference{Name: catalog.Kinds[0].Plural, Kind: catalog.Kinds[0].Kind, Version: catalog.Version}
	if k.Support == catalog.SchemaOnly {
		return []operatorsv1alpha1.APIResourceReference{proxy}
	}
	switch k.Role {
	case catalog.RoleProxy:
		return ownedResources(render.Children)
	case catalog.RoleProfile:
		return ownedResources([]render.ChildKind{render.DeploymentChild, render.SecretChild})
	case catalog.RoleLicense:
		return []operatorsv1alpha1.APIResourceReference{proxy}
	default: // pipeline, router, step, observability: rendered into the graph
		return ownedResources([]render.ChildKind{render.ConfigMapChild, render.DeploymentChild})
	}
}

// ownedResources are the objects the operator makes for a NexoProxy, as the CSV declares them.
func ownedResources(kinds []render.ChildKind) []operatorsv1alpha1.APIResourceReference {
	var out []operatorsv1alpha1.APIResourceReference
	for _, c := range kinds {
		out = append(out, operatorsv1alpha1.APIResourceReference{Name: c.Resource, Kind: c.Kind(), Version: c.GVK.Version})
	}
	return out
}
