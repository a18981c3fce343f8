package v1alpha1_test

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
)

const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func TestProfileApprovesImages(t *testing.T) {
	p := nexov1alpha1.NexoDeploymentProfileSpec{
		Images:         nexov1alpha1.RuntimeImages{Ingress: "registry.example.com/nexo/proxy:0.3.0", Egress: "registry.example.com/nexo/egress:0.3.0"},
		ApprovedImages: []nexov1alpha1.Image{"registry.example.com/nexo/proxy:0.3.1", "registry.example.com/nexo/canary@" + digest, "nginx:1.27"},
	}
	for image, want := range map[nexov1alpha1.Image]bool{
		"registry.example.com/nexo/proxy:0.3.0":                                                true, // spec.images
		"registry.example.com/nexo/egress:0.3.0":                                               true,
		"registry.example.com/nexo/proxy:0.3.1":                                                true, // approved by tag
		"registry.example.com/nexo/proxy:0.3.1@" + digest:                                      true, // the approved tag, pinned
		"registry.example.com/nexo/canary@" + digest:                                           true, // approved by digest
		"registry.example.com/nexo/canary:any@" + digest:                                       true,
		"docker.io/library/nginx:1.27":                                                         true, // as a registry reads it
		"registry.example.com/nexo/proxy:0.4.0":                                                false,
		"registry.example.com/nexo/proxy":                                                      false, // latest
		"registry.example.com/nexo/canary:1":                                                   false, // a tag where only a digest is approved
		nexov1alpha1.Image("registry.example.com/nexo/canary@" + digest[:len(digest)-1] + "0"): false, // another digest
		"evil.example.com/nexo/proxy:0.3.1":                                                    false,
		"registry.example.com/nexo/proxy-evil:0.3.1":                                           false,
	} {
		if got := p.Approves(image); got != want {
			t.Errorf("Approves(%s) = %v, want %v", image, got, want)
		}
	}
}

func TestImageNotApprovedMessage(t *testing.T) {
	profile := &nexov1alpha1.NexoDeploymentProfile{ObjectMeta: metav1.ObjectMeta{Name: "standard"},
		Spec: nexov1alpha1.NexoDeploymentProfileSpec{Images: nexov1alpha1.RuntimeImages{Ingress: "r/i:1", Egress: "r/e:1"}}}
	msg := nexov1alpha1.ImageNotApprovedMessage("evil/x:1", profile)
	for _, want := range []string{"evil/x:1", "NexoDeploymentProfile standard", "r/i:1, r/e:1", "no spec.approvedImages", "last good revision"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q does not say %q", msg, want)
		}
	}
}
