package main

import (
	"bytes"
	"debug/buildinfo"
	"fmt"

	cdx "github.com/CycloneDX/cyclonedx-go"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// sbomType is the media type of a CycloneDX JSON document, and the artifact type of the SBOM
// referrers a release attaches to its images.
const sbomType types.MediaType = "application/vnd.cyclonedx+json"

// sbomOf is the CycloneDX SBOM of a Go binary, from the build information the Go linker keeps
// in it: the main module, every module it links (with its version and checksum), and the Go
// version and build settings.
func sbomOf(exe string, b binary, s source) ([]byte, error) {
	info, err := buildinfo.ReadFile(exe)
	if err != nil {
		return nil, fmt.Errorf("%s: no Go build information: %w", exe, err)
	}
	bom := cdx.NewBOM()
	bom.SerialNumber = "" // a fixed document: the same binary gives the same SBOM
	main := cdx.Component{
		BOMRef: "pkg:golang/" + info.Main.Path + "@" + s.Version, Type: cdx.ComponentTypeApplication,
		Name: b.Image, Version: s.Version, PackageURL: "pkg:golang/" + info.Main.Path + "@" + s.Version,
		Properties: &[]cdx.Property{{Name: "go:version", Value: info.GoVersion}, {Name: "vcs:revision", Value: s.Commit}},
	}
	for _, st := range info.Settings {
		*main.Properties = append(*main.Properties, cdx.Property{Name: "go:build:" + st.Key, Value: st.Value})
	}
	bom.Metadata = &cdx.Metadata{Timestamp: s.Time.Format("2006-01-02T15:04:05Z"), Component: &main}
	var components []cdx.Component
	var deps []string
	for _, d := range info.Deps {
		m := d
		if d.Replace != nil {
			m = d.Replace
		}
		purl := "pkg:golang/" + m.Path + "@" + m.Version
		c := cdx.Component{BOMRef: purl, Type: cdx.ComponentTypeLibrary, Name: m.Path, Version: m.Version, PackageURL: purl}
		if m.Sum != "" {
			c.Hashes = &[]cdx.Hash{{Algorithm: cdx.HashAlgoSHA256, Value: m.Sum}}
		}
		components = append(components, c)
		deps = append(deps, purl)
	}
	bom.Components = &components
	bom.Dependencies = &[]cdx.Dependency{{Ref: main.BOMRef, Dependencies: &deps}}
	var out bytes.Buffer
	enc := cdx.NewBOMEncoder(&out, cdx.BOMFileFormatJSON)
	enc.SetPretty(true)
	if err := enc.Encode(bom); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// sbomArtifact is the OCI artifact that attaches an SBOM to an image: an image manifest whose
// config media type is the SBOM's (its artifact type), with the SBOM as its one layer and the
// image as its subject, so a registry lists it among the image's referrers.
func sbomArtifact(sbom []byte, subject v1.Descriptor, s source) (v1.Image, error) {
	img, err := mutate.AppendLayers(mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), sbomType),
		static.NewLayer(sbom, sbomType))
	if err != nil {
		return nil, err
	}
	img = mutate.Annotations(img, map[string]string{"org.opencontainers.image.created": s.Time.Format("2006-01-02T15:04:05Z")}).(v1.Image)
	return mutate.Subject(img, subject).(v1.Image), nil
}
