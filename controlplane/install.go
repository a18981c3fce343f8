package controlplane

import (
	"errors"
	"fmt"
	"net/http"

	"sigs.k8s.io/yaml"

	"github.com/nexo-io/nexo-edge/catalog"
)

// InstallCommand is what the Control Plane hands a user to install an environment
// (docs/protocol.md, "Admin API"): version-pinned, complete, and free of the token itself (it is a file the user saved
// when the environment was registered or its token rotated).
type InstallCommand struct {
	Environment string `json:"environment"`
	// Version is the bundle version every command below pins.
	Version         string `json:"version"`
	ControlPlaneURL string `json:"controlPlaneURL"`
	// Nexoctl is the one command for a Helm-based install (nexoctl embeds the chart).
	Nexoctl string `json:"nexoctl"`
	// HelmValues are the chart values the install needs, for Helm users.
	HelmValues map[string]any `json:"helmValues"`
	// OLMSubscription is the Subscription (with config.env) for OperatorHub users, and
	// OLMTokenSecret the command that adds the token Secret next to it.
	OLMSubscription string `json:"olmSubscription"`
	OLMTokenSecret  string `json:"olmTokenSecret"`
}

// Install renders the install command of an environment. The Control Plane URL is the one
// Managers reach (Server.PublicURL); there is no default.
func Install(envID, controlPlaneURL string) (InstallCommand, error) {
	if controlPlaneURL == "" {
		return InstallCommand{}, errors.New("this Control Plane has no public URL configured (controlplane serve --public-url): the install command cannot name it")
	}
	const tokenFile = "./connect-token"
	sub := map[string]any{
		"apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
		"metadata": map[string]any{"name": "nexo-operator", "namespace": "nexo-system"},
		"spec": map[string]any{
			"channel": catalog.DefaultChannel(catalog.BuildVersion), "name": "nexo-operator",
			"source": "nexo-edge", "sourceNamespace": "openshift-marketplace", "installPlanApproval": "Manual",
			"startingCSV": "nexo-operator.v" + catalog.BuildVersion,
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
	return InstallCommand{
		Environment: envID, Version: catalog.BuildVersion, ControlPlaneURL: controlPlaneURL,
		Nexoctl: fmt.Sprintf("nexoctl install --token-file %s --control-plane-url %s --set environmentID=%s   # nexoctl %s (nexoctl version)",
			tokenFile, controlPlaneURL, envID, catalog.BuildVersion),
		HelmValues:      map[string]any{"environmentID": envID, "manager": map[string]any{"controlPlaneURL": controlPlaneURL}},
		OLMSubscription: string(subYAML),
		// The bundle ships no trusted-keys Secret (OLM would replace it on every upgrade): the
		// installer creates it, empty, with the token's.
		OLMTokenSecret: "kubectl -n nexo-system create secret generic nexo-connect-token --from-file=token=" + tokenFile +
			" && kubectl -n nexo-system create secret generic nexo-trusted-keys",
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
