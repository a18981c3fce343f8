package main

import (
	"os"
	"slices"

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
		Name      string `json:"name"`
		Replaces  string `json:"replaces,omitempty"`
		SkipRange string `json:"skipRange,omitempty"`
	}
	fbcBundle struct {
		Schema     string        `json:"schema"`
		Name       string        `json:"name"`
		Package    string        `json:"package"`
		Image      string        `json:"image"`
		Properties []fbcProperty `json:"properties"`
		// RelatedImages are the bundle's images, as opm render lists them (mirroring tools
		// read them).
		RelatedImages []map[string]string `json:"relatedImages,omitempty"`
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

// olmCatalog writes the file-based catalog, the manifests an OpenShift or OLM user applies to
// subscribe, and PROJECT. The catalog holds the released versions only (releases/*, each bundle
// image by digest): a version enters it when make release publishes it. Each channel lists the
// versions in it with their replaces and skipRange edges (docs/upgrade.md).
func olmCatalog() error {
	rels, err := releases()
	if err != nil {
		return err
	}
	// The package's icon is the newest release's: the catalog holds released versions only, and a
	// published catalog is never rebuilt differently (a new logo enters with the next release).
	logo, err := icon()
	if err != nil {
		return err
	}
	if n := len(rels); n > 0 && len(rels[n-1].CSV.Spec.Icon) > 0 {
		logo = rels[n-1].CSV.Spec.Icon[0].Data
	}
	docs := []any{fbcPackage{Schema: "olm.package", Name: packageName, DefaultChannel: catalog.DefaultChannel(catalog.BuildVersion), Icon: fbcIcon{Data: logo, MediaType: "image/svg+xml"}}}
	channels := map[string]*fbcChannel{}
	var order []string
	for _, r := range rels {
		for _, ch := range catalog.Channels(r.Version.String()) {
			if channels[ch] == nil {
				channels[ch] = &fbcChannel{Schema: "olm.channel", Package: packageName, Name: ch}
				order = append(order, ch)
			}
			e := fbcEntry{Name: r.CSV.Name, SkipRange: r.CSV.Annotations["olm.skipRange"]}
			// An edge into a version outside this channel would dangle: replaces names only
			// channel members (the skipRange still covers the rest).
			if slices.ContainsFunc(channels[ch].Entries, func(x fbcEntry) bool { return x.Name == r.CSV.Spec.Replaces }) {
				e.Replaces = r.CSV.Spec.Replaces
			}
			channels[ch].Entries = append(channels[ch].Entries, e)
		}
	}
	slices.Sort(order)
	for _, ch := range order {
		docs = append(docs, *channels[ch])
	}
	for _, r := range rels {
		docs = append(docs, catalogBundle(r.CSV, r.BundleImage))
	}
	if err := os.MkdirAll("olm/catalog/"+packageName, 0o755); err != nil {
		return err
	}
	if err := writeYAML("olm/catalog/"+packageName+"/catalog.yaml", generatedHeader+"---\n", docs...); err != nil {
		return err
	}
	// The Subscription starts at the newest released CSV, from the catalog image published with
	// it, by digest (a released catalog cannot hold this build's CSV before it is released).
	image, csvName, err := publishedCatalog(rels)
	if err != nil {
		return err
	}
	if err := writeTemplate("olm/subscribe.yaml", "subscribe.yaml",
		map[string]string{"Header": generatedHeader, "Package": packageName, "Channel": catalog.DefaultChannel(catalog.BuildVersion),
			"CSVName": csvName, "CatalogImage": image, "CatalogDir": "/configs"}); err != nil {
		return err
	}
	// PROJECT: the kubebuilder project file, so operator-sdk users can run
	// `operator-sdk bundle validate ./bundle` and `operator-sdk scorecard ./bundle` here.
	return writeTemplate("PROJECT", "PROJECT",
		map[string]any{"Header": generatedHeader, "Package": packageName, "Kinds": catalog.Kinds, "Version": catalog.Version})
}

// catalogBundle is the olm.bundle entry of a released CSV, with the properties a catalog
// renderer (opm render) writes: the package and version, a gvk per owned CRD, and the
// olm.csv.metadata OperatorHub shows without pulling the bundle image.
func catalogBundle(csv *operatorsv1alpha1.ClusterServiceVersion, image string) fbcBundle {
	version := csv.Spec.Version.String()
	properties := []fbcProperty{{Type: "olm.package", Value: map[string]string{"packageName": packageName, "version": version}}}
	for _, o := range csv.Spec.CustomResourceDefinitions.Owned {
		properties = append(properties, fbcProperty{Type: "olm.gvk", Value: map[string]string{"group": catalog.Group, "kind": o.Kind, "version": o.Version}})
	}
	properties = append(properties, fbcProperty{Type: "olm.csv.metadata", Value: csvMetadata{
		Annotations: csv.Annotations, CRDDescriptions: csv.Spec.CustomResourceDefinitions, Description: csv.Spec.Description,
		DisplayName: csv.Spec.DisplayName, InstallModes: csv.Spec.InstallModes, Keywords: csv.Spec.Keywords, Labels: csv.Labels,
		Links: csv.Spec.Links, Maintainers: csv.Spec.Maintainers, Maturity: csv.Spec.Maturity, MinKubeVersion: csv.Spec.MinKubeVersion,
		Provider: csv.Spec.Provider,
	}})
	relatedImages := []map[string]string{}
	for _, ri := range csv.Spec.RelatedImages {
		relatedImages = append(relatedImages, map[string]string{"name": ri.Name, "image": ri.Image})
	}
	return fbcBundle{Schema: "olm.bundle", Name: csv.Name, Package: packageName, Image: image, Properties: properties, RelatedImages: relatedImages}
}
