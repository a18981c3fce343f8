package v1alpha1

import (
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
)

// Approves reports whether a NexoProxy of this profile may run image (its spec.proxyImage): one
// of spec.images, or an entry of spec.approvedImages. References are compared as registries
// read them (docker.io/library/x is x): an entry with a digest approves that digest of its
// repository; an entry with a tag approves its repository at that tag, also when the proxy pins
// the tag by digest (repo:tag@sha256:...).
func (p *NexoDeploymentProfileSpec) Approves(image Image) bool {
	want, err := parseImage(string(image))
	if err != nil {
		return false
	}
	for _, entry := range p.approved() {
		got, err := parseImage(string(entry))
		if err != nil || got.repository != want.repository {
			continue
		}
		if got.digest != "" {
			if got.digest == want.digest {
				return true
			}
			continue
		}
		if got.tag != "" && got.tag == want.tag {
			return true
		}
	}
	return false
}

// ImageNotApprovedMessage says that profile does not approve image, what it approves, and who
// can change that (the operator's condition, the Manager's refusal of a rollout).
func ImageNotApprovedMessage(image Image, profile *NexoDeploymentProfile) string {
	extra := "spec.images and spec.approvedImages"
	if len(profile.Spec.ApprovedImages) == 0 {
		extra = "its spec.images only: it lists no spec.approvedImages"
	}
	return fmt.Sprintf("spec.proxyImage %s is not approved by NexoDeploymentProfile %s, which approves %s (%s); "+
		"ask the profile's owner to add it to spec.approvedImages, or set spec.proxyImage to an approved image (or remove it to run the profile's spec.images); "+
		"the proxy keeps running its last good revision",
		image, profile.Name, profile.Spec.ApprovedList(), extra)
}

// ApprovedList is what the profile approves, for messages: "a, b, c".
func (p *NexoDeploymentProfileSpec) ApprovedList() string {
	var out []string
	for _, i := range p.approved() {
		out = append(out, string(i))
	}
	return strings.Join(out, ", ")
}

func (p *NexoDeploymentProfileSpec) approved() []Image {
	out := []Image{p.Images.Ingress, p.Images.Egress}
	return append(out, p.ApprovedImages...)
}

type imageRef struct{ repository, tag, digest string }

// parseImage splits a reference into its repository (normalized), tag (as written, "" when the
// reference has only a digest) and digest.
func parseImage(s string) (imageRef, error) {
	base, digest, _ := strings.Cut(s, "@")
	tag, err := name.NewTag(base, name.WeakValidation)
	if err != nil {
		return imageRef{}, fmt.Errorf("image %q: %w", s, err)
	}
	ref := imageRef{repository: tag.Context().Name(), digest: digest}
	if lastSlash := strings.LastIndex(base, "/"); strings.Contains(base[lastSlash+1:], ":") {
		ref.tag = tag.TagStr()
	} else if digest == "" {
		ref.tag = tag.TagStr() // "latest", as a registry reads it
	}
	return ref, nil
}
