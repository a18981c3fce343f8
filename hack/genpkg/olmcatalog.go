package main

import (
	"os"

	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"

	"github.com/nexo-io/nexo-edge/catalog"
)

// The file-based catalog's schemas (operator-registry's declcfg types; that module is not used
// here).
type (
	fbcPackage struct {
		Schema         string  `json:"schema"`
		Name           string  `json:"name"`
		DefaultChannel string  `json:"defaultChannel"`
		Icon           fbcIcon `json:"icon"`
	}
	fbcIcon struct {
		Data      string `json:"base64data"`
		MediaType string `json:"mediatype"`
	}
	fbcChannel struct {
		Schema  string     `json:"schema"`
		Package string     `json:"package"`
		Name    string     `json:"name"`
		Entries []fbcEntry `json:"entries"`
	}
	fbcEntry struct {
		Name string `json:"name"`
	}
	fbcBundle struct {
		Schema     string        `json:"schema"`
		Name       string        `json:"name"`
		Package    string        `json:"package"`
		Image      string        `json:"image"`
		Properties []fbcProperty `json:"properties"`
	}
	fbcProperty struct {
		Type  string `json:"type"`
		Value any    `json:"value"`
	}
)

// csvMetadata is the value of a catalog's olm.csv.metadata property (operator-registry's
// property.CSVMetadata; that module is not used here).
type csvMetadata struct {
	Annotations     map[string]string                           `json:"annotations,omitempty"`
	CRDDescriptions operatorsv1alpha1.CustomResourceDefinitions `json:"crdDescriptions,omitempty"`
	Description     string                                      `json:"description,omitempty"`
	DisplayName     string                                      `json:"displayName,omitempty"`
	InstallModes    []operatorsv1alpha1.InstallMode             `json:"installModes,omitempty"`
	Keywords        []string                                    `json:"keywords,omitempty"`
	Labels          map[string]string                           `json:"labels,omitempty"`
	Links           []operatorsv1alpha1.AppLink                 `json:"links,omitempty"`
	Maintainers     []operatorsv1alpha1.Maintainer              `json:"maintainers,omitempty"`
	Maturity        string                                      `json:"maturity,omitempty"`
	MinKubeVersion  string                                      `json:"minKubeVersion,omitempty"`
	Provider        operatorsv1alpha1.AppLink                   `json:"provider,omitempty"`
}

// olmCatalog writes the file-based catalog (olm.package, olm.channel, olm.bundle) for the package,
// the manifests an OpenShift or OLM user applies to subscribe, and PROJECT.
func olmCatalog(csv *operatorsv1alpha1.ClusterServiceVersion) error {
	csvName := packageName + ".v" + catalog.BuildVersion
	properties := []fbcProperty{{Type: "olm.package", Value: map[string]string{"packageName": packageName, "version": catalog.BuildVersion}}}
	for _, k := range catalog.Kinds {
		properties = append(properties, fbcProperty{Type: "olm.gvk", Value: map[string]string{"group": catalog.Group, "kind": k.Kind, "version": catalog.Version}})
	}
	// olm.csv.metadata, as a catalog renderer (opm render) writes it: what OperatorHub shows on
	// the tile and the details page without pulling the bundle image.
	properties = append(properties, fbcProperty{Type: "olm.csv.metadata", Value: csvMetadata{
		Annotations: csv.Annotations, CRDDescriptions: csv.Spec.CustomResourceDefinitions, Description: csv.Spec.Description,
		DisplayName: csv.Spec.DisplayName, InstallModes: csv.Spec.InstallModes, Keywords: csv.Spec.Keywords, Labels: csv.Labels,
		Links: csv.Spec.Links, Maintainers: csv.Spec.Maintainers, Maturity: csv.Spec.Maturity, MinKubeVersion: csv.Spec.MinKubeVersion,
		Provider: csv.Spec.Provider,
	}})
	if err := os.MkdirAll("olm/catalog/"+packageName, 0o755); err != nil {
		return err
	}
	if err := writeYAML("olm/catalog/"+packageName+"/catalog.yaml", generatedHeader+"---\n",
		fbcPackage{Schema: "olm.package", Name: packageName, DefaultChannel: channel, Icon: fbcIcon{Data: icon, MediaType: "image/svg+xml"}},
		fbcChannel{Schema: "olm.channel", Package: packageName, Name: channel, Entries: []fbcEntry{{Name: csvName}}},
		fbcBundle{Schema: "olm.bundle", Name: csvName, Package: packageName, Image: "ghcr.io/nexo-io/nexo-operator-bundle:v" + catalog.BuildVersion, Properties: properties},
	); err != nil {
		return err
	}
	if err := writeTemplate("olm/subscribe.yaml", "subscribe.yaml",
		map[string]string{"Header": generatedHeader, "Package": packageName, "Channel": channel, "CSVName": csvName}); err != nil {
		return err
	}
	// PROJECT: the kubebuilder project file, so operator-sdk users can run
	// `operator-sdk bundle validate ./bundle` and `operator-sdk scorecard ./bundle` here.
	return writeTemplate("PROJECT", "PROJECT",
		map[string]any{"Header": generatedHeader, "Package": packageName, "Kinds": catalog.Kinds, "Version": catalog.Version})
}
