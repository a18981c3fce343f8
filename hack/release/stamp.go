package main

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	kustomizetypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/yaml"
)

// digests are the released images of a version, each by digest (registry/name@sha256:…), by
// image name (nexo-operator, nexo-manager).
type digests map[string]string

// imageName is the last path element of an image reference's repository: ghcr.io/nexo-io/
// nexo-operator:0.2.0 is nexo-operator.
func imageName(ref string) string {
	r, err := name.ParseReference(ref)
	if err != nil {
		return ""
	}
	repo := r.Context().RepositoryStr()
	return repo[strings.LastIndex(repo, "/")+1:]
}

// pin is ref by digest when it names a released image, else ref unchanged.
func (d digests) pin(ref string) string {
	if by, ok := d[imageName(ref)]; ok {
		return by
	}
	return ref
}

// stampCSV pins every image of a CSV by digest: the containerImage annotation, every container
// of both Deployments, every RELATED_IMAGE_* environment variable, the Manager's proxy image
// (NEXO_PROXY_IMAGE) and relatedImages, and sets
// createdAt to the release's time. It fails when an image is left by tag, since a mirror copies
// digests only.
func stampCSV(raw []byte, d digests, created string) ([]byte, error) {
	csv := &operatorsv1alpha1.ClusterServiceVersion{}
	if err := yaml.UnmarshalStrict(raw, csv); err != nil {
		return nil, err
	}
	var unpinned []string
	check := func(where, ref string) {
		if !strings.Contains(ref, "@sha256:") {
			unpinned = append(unpinned, where+" "+ref)
		}
	}
	csv.Annotations["containerImage"] = d.pin(csv.Annotations["containerImage"])
	check("containerImage", csv.Annotations["containerImage"])
	deps := csv.Spec.InstallStrategy.StrategySpec.DeploymentSpecs
	for i := range deps {
		pod := &deps[i].Spec.Template.Spec
		for _, cs := range [][]corev1.Container{pod.InitContainers, pod.Containers} {
			for j := range cs {
				cs[j].Image = d.pin(cs[j].Image)
				check(deps[i].Name+"/"+cs[j].Name, cs[j].Image)
				for k, e := range cs[j].Env {
					if strings.HasPrefix(e.Name, "RELATED_IMAGE_") || e.Name == "NEXO_PROXY_IMAGE" {
						cs[j].Env[k].Value = d.pin(e.Value)
						check(e.Name, cs[j].Env[k].Value)
					}
				}
			}
		}
	}
	for i := range csv.Spec.RelatedImages {
		csv.Spec.RelatedImages[i].Image = d.pin(csv.Spec.RelatedImages[i].Image)
		check("relatedImages "+csv.Spec.RelatedImages[i].Name, csv.Spec.RelatedImages[i].Image)
	}
	if len(unpinned) > 0 {
		return nil, fmt.Errorf("the CSV names images that were not released: %s", strings.Join(unpinned, ", "))
	}
	// OperatorHub sorts by createdAt: the release's time, not the generator's fixed one. The
	// "disconnected" claim stays false: every image is by digest now, but the Manager still
	// needs its Control Plane (docs/release.md, "Disconnected clusters").
	csv.Annotations["createdAt"] = created
	return yaml.Marshal(csv)
}

// stampValues sets the chart's operator and Manager image to the released repository and digest
// (the chart renders repository@digest when digest is set). It edits the two lines of each
// image block in place, so values.yaml keeps every comment and blank line a user reads, and then
// parses the result to check that exactly these values say so.
func stampValues(raw []byte, d digests) ([]byte, error) {
	lines := strings.Split(string(raw), "\n")
	for _, c := range []struct{ key, image string }{{"operator", "nexo-operator"}, {"manager", "nexo-manager"}} {
		ref, err := name.NewDigest(d[c.image])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.image, err)
		}
		set := map[string]string{"repository": ref.Context().Name(), "digest": strconv.Quote(ref.DigestStr())}
		top := slices.Index(lines, c.key+":")
		img := slices.Index(lines[top+1:], "  image:") + top + 1
		if top < 0 || img == top {
			return nil, fmt.Errorf("values.yaml has no %s.image block", c.key)
		}
		for i := img + 1; i < len(lines) && strings.HasPrefix(lines[i], "    "); i++ {
			field := strings.TrimSpace(lines[i])
			for k, v := range set {
				if strings.HasPrefix(field, k+":") {
					lines[i] = "    " + k + ": " + v
					delete(set, k)
				}
			}
		}
		if len(set) > 0 {
			return nil, fmt.Errorf("values.yaml: %s.image has no %v", c.key, slices.Sorted(maps.Keys(set)))
		}
	}
	out := []byte(strings.Join(lines, "\n"))
	var check struct {
		Operator, Manager struct {
			Image struct{ Repository, Digest string }
		}
	}
	if err := yaml.Unmarshal(out, &check); err != nil {
		return nil, err
	}
	for img, got := range map[string]string{"nexo-operator": check.Operator.Image.Repository + "@" + check.Operator.Image.Digest, "nexo-manager": check.Manager.Image.Repository + "@" + check.Manager.Image.Digest} {
		if got != d[img] {
			return nil, fmt.Errorf("values.yaml names %s as %s after stamping, not %s", img, got, d[img])
		}
	}
	return out, nil
}

// kustomization is a release's kustomize entry point: the configuration as released, with every
// product image replaced by its digest.
func kustomization(d digests, defaultImages map[string]string) ([]byte, error) {
	k := kustomizetypes.Kustomization{
		TypeMeta:  kustomizetypes.TypeMeta{APIVersion: kustomizetypes.KustomizationVersion, Kind: kustomizetypes.KustomizationKind},
		Resources: []string{"config/default"},
	}
	for _, image := range []string{"nexo-operator", "nexo-manager"} {
		ref, err := name.NewDigest(d[image])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", image, err)
		}
		k.Images = append(k.Images, kustomizetypes.Image{Name: defaultImages[image], NewName: ref.Context().Name(), Digest: ref.DigestStr()})
	}
	return yaml.Marshal(k)
}
