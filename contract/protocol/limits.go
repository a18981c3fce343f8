package protocol

import (
	"fmt"
	"slices"

	"github.com/google/go-containerregistry/pkg/name"
)

// AllowAll in a limit's list allows everything of its kind: a cluster admin's explicit choice.
const AllowAll = "*"

// AllowsNamespace reports whether the limits allow deploying into ns. Empty allows nothing.
func (l *Limits) AllowsNamespace(ns string) bool {
	return l != nil && (slices.Contains(l.Namespaces, AllowAll) || slices.Contains(l.Namespaces, ns))
}

// AllowsImage reports whether the limits allow image, by its repository (ImageRepository).
// Empty allows nothing.
func (l *Limits) AllowsImage(image string) bool {
	if l == nil {
		return false
	}
	repo, err := ImageRepository(image)
	return err == nil && (slices.Contains(l.ImageRepositories, AllowAll) || slices.Contains(l.ImageRepositories, repo))
}

// ImageRepository is an image reference's repository, without tag or digest
// (registry.example.com/nexo/proxy for registry.example.com/nexo/proxy:0.2.1@sha256:…). The
// Manager and the Control Plane read a limit with this one function.
func ImageRepository(image string) (string, error) {
	ref, err := name.ParseReference(image)
	if err != nil {
		return "", err
	}
	return ref.Context().Name(), nil
}

// NamespaceLimitHint says which value lets the Manager deploy into ns, on every install path:
// what a refusal and nexoctl preflight print (docs/security.md, "The cluster's own limit").
func NamespaceLimitHint(ns string) string {
	return fmt.Sprintf("to allow it, the cluster admin adds %q to the deploy limit: chart value manager.deployNamespaces (nexoctl install --set manager.deployNamespaces={%s}); "+
		"kustomize: key deployNamespaces of the ConfigMap nexo-manager-limits; OLM: NEXO_DEPLOY_NAMESPACES in the Subscription's config.env (comma-separated; %q allows all)", ns, ns, AllowAll)
}

// ImageLimitHint says which value lets the Manager run images of repo.
func ImageLimitHint(repo string) string {
	return fmt.Sprintf("to allow it, the cluster admin adds %q to the image limit: chart value manager.allowedImageRepositories; "+
		"kustomize: key imageRepositories of the ConfigMap nexo-manager-limits; OLM: NEXO_ALLOWED_IMAGE_REPOSITORIES in the Subscription's config.env (comma-separated; %q allows all)", repo, AllowAll)
}
