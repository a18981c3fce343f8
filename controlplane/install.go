package controlplane

import (
	"errors"
	"fmt"
	"net/http"

	"sigs.k8s.io/yaml"

	"github.com/nexo-io/nexo-edge/catalog"
)

// InstallCommand is what the Control Plane hands a user to install an environment
// (docs/protocol.md, "Admin API"): complete, pinned to one bundle version on every path, and
// free of the token itself (it is a file the user saved when the environment was registered or
// its token rotated).
type InstallCommand struct {
	Environment string `json:"environment"`
	// Version is the bundle version every command below pins.
	Version         string `json:"version"`
	ControlPlaneURL string `json:"controlPlaneURL"`
	// Nexoctl is the one command for a Helm-based install (nexoctl embeds the chart): its
	// --version refuses a nexoctl of another version.
	Nexoctl string `json:"nexoctl"`
	// Helm installs the released chart (Helm's OCI artifact) at Version, for Helm users, with
	// HelmValues; the token Secret comes first (HelmTokenSecret).
	Helm            string         `json:"helm"`
	HelmValues      map[string]any `json:"helmValues"`
	HelmTokenSecret string         `json:"helmTokenSecret"`
	// Kustomize installs the release's kustomize entry point (releases/<Version>/, which never
	// changes once released), then the installation ConfigMap and the token Secret.
	Kustomize []string `json:"kustomize"`
	// OLMSubscription is the Subscription (startingCSV pinned, config.env) for OperatorHub
	// users, and OLMTokenSecret the command that adds the token Secret next to it.
	OLMSubscription string `json:"olmSubscription"`
	OLMTokenSecret  string `json:"olmTokenSecret"`
}

// Install renders the install command of an environment. The Control Plane URL is the one
// Managers reach (Server.PublicURL); there is no default.
func Install(envID, controlPlaneURL string) (InstallCommand, error) {
	if controlPlaneURL == "" {
		return InstallCommand{}, errors.New("this Control Plane has no public URL configured (controlplane serve --public-url): the install command cannot name it")
	}
	const tokenFile, ns = "./connect-token", "nexo-system"
	version := catalog.BuildVersion
	sub := map[string]any{
		"apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
		"metadata": map[string]any{"name": "nexo-operator", "namespace": ns},
		"spec": map[string]any{
			"channel": catalog.DefaultChannel(version), "name": "nexo-operator",
			"source": "nexo-edge", "sourceNamespace": "openshift-marketplace", "installPlanApproval": "Manual",
			"startingCSV": "nexo-operator.v" + version,
			"config": map[string]any{"env": []any{
				map[string]any{"name": "NEXO_CONTROL_PLANE_URL", "value": controlPlaneURL},
				map[string]any{"name": "NEXO_ENVIRONMENT_ID", "value": envID},
			}},
		},
	}
	subYAML, err := yaml.Marshal(sub)
	if err != nil {
		return InstallCommand{}, err
	}
	tokenSecret := fmt.Sprintf("kubectl -n %s create secret generic nexo-connect-token --from-file=token=%s", ns, tokenFile)
	return InstallCommand{
		Environment: envID, Version: version, ControlPlaneURL: controlPlaneURL,
		Nexoctl: fmt.Sprintf("nexoctl install --version %s --token-file %s --control-plane-url %s --set-string environmentID=%s",
			version, tokenFile, controlPlaneURL, envID),
		Helm: fmt.Sprintf("helm upgrade --install nexo-edge %s --version %s --namespace %s --set-string environmentID=%s --set manager.controlPlaneURL=%s",
			catalog.ChartReference, version, ns, envID, controlPlaneURL),
		HelmValues:      map[string]any{"environmentID": envID, "manager": map[string]any{"controlPlaneURL": controlPlaneURL}},
		HelmTokenSecret: fmt.Sprintf("kubectl create namespace %s && %s", ns, tokenSecret),
		Kustomize: []string{
			fmt.Sprintf("kubectl apply --server-side -k '%s//releases/%s'", catalog.SourceRepository, version),
			fmt.Sprintf("kubectl -n %s create configmap nexo-manager-config --from-literal=controlPlaneURL=%s --from-literal=environmentID=%s", ns, controlPlaneURL, envID),
			tokenSecret,
		},
		OLMSubscription: string(subYAML),
		// The bundle ships no trusted-keys Secret (OLM would replace it on every upgrade): the
		// installer creates it, empty, with the token's.
		OLMTokenSecret: tokenSecret + fmt.Sprintf(" && kubectl -n %s create secret generic nexo-trusted-keys", ns),
	}, nil
}

func (s *Server) installCommand(w http.ResponseWriter, r *http.Request) error {
	env, err := s.pathEnvironment(r)
	if err != nil {
		return err
	}
	cmd, err := Install(env.ID, s.cfg.PublicURL)
	if err != nil {
		return fail(http.StatusConflict, "%v", err)
	}
	writeJSON(w, http.StatusOK, cmd)
	return nil
}
