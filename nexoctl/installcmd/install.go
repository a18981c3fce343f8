// Package installcmd is `nexoctl install` and `nexoctl uninstall`: the embedded chart through
// the Helm SDK, and the connect-token Secret through client-go, outside Helm, so the token is
// in no release record.
package installcmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/cli"
	"helm.sh/helm/v3/pkg/cli/values"
	"helm.sh/helm/v3/pkg/getter"
	"helm.sh/helm/v3/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nexo-io/nexo-edge/catalog"
	"github.com/nexo-io/nexo-edge/charts"
	"github.com/nexo-io/nexo-edge/contract/connecttoken"
	"github.com/nexo-io/nexo-edge/contract/wire"
	"github.com/nexo-io/nexo-edge/nexoctl/cliopts"
	"github.com/nexo-io/nexo-edge/preflight"
	"github.com/nexo-io/nexo-edge/preflight/upgrade"
)

// ReleaseName is the Helm release nexoctl manages unless --release names another.
const ReleaseName = "nexo-edge"

// Summary is what `nexoctl install -o json` prints (never the token).
type Summary struct {
	Namespace    string `json:"namespace"`
	Release      string `json:"release,omitempty"`
	Action       string `json:"action"` // installed, upgraded, secret-only (OLM), dry-run
	ChartVersion string `json:"chartVersion"`
	Environment  string `json:"environment"`
	// RegistrySecrets are the shareable registry credentials installed ("name created|updated|unchanged").
	RegistrySecrets []string `json:"registrySecrets,omitempty"`
	TokenSecret     string   `json:"tokenSecret"`
	SecretAction    string   `json:"secretAction"` // created, updated, unchanged, would-apply
	OLM             bool     `json:"olm"`
	// TrustedKeys is what an OLM install did with the trusted-keys Secret (EnsureTrustedKeys).
	TrustedKeys string `json:"trustedKeys,omitempty"`
	// InstallConfig is what an OLM install did with the installation ConfigMap (the Control
	// Plane URL and the environment id): created, updated or unchanged.
	InstallConfig string   `json:"installConfig,omitempty"`
	Warnings      []string `json:"warnings,omitempty"`
	RenderedBytes int      `json:"renderedBytes,omitempty"`
}

// readToken reads and validates the token file before anything touches the cluster, and returns
// the token with the environment it is bound to.
func readToken(o *cliopts.Options, file string) (token, environment string, warnings []string, err error) {
	var raw []byte
	if file == "-" {
		raw, err = io.ReadAll(o.In)
	} else {
		var st os.FileInfo
		if st, err = os.Stat(file); err == nil {
			if st.Mode().Perm()&0o077 != 0 {
				warnings = append(warnings, fmt.Sprintf("%s is readable by group or others (mode %04o); chmod 600 it", file, st.Mode().Perm()))
			}
			raw, err = os.ReadFile(file)
		}
	}
	if err != nil {
		return "", "", nil, cliopts.Fail(cliopts.ExitCannot, "cannot read the token file: %v", err)
	}
	env, err := connecttoken.Parse(string(raw))
	if err != nil {
		return "", "", nil, cliopts.Fail(cliopts.ExitCannot, "token file %s: %v", file, err)
	}
	return string(raw), env, warnings, nil
}

// request is one install, as the flags and the token file asked for it.
type request struct {
	namespace string
	// token is the connect token as read (it goes only into its Secret); environment is the
	// environment it is bound to.
	token, environment string
	registrySecrets    []registrySecret
	values             *values.Options
	dryRun, wait       bool
	timeout            time.Duration
	lifecycle          lifecycle
}

// NewCmd builds `nexoctl install`.
func NewCmd(o *cliopts.Options) *cobra.Command {
	var tokenFile, controlPlaneURL, version string
	var registryArgs []string
	var valueOpts values.Options
	var dryRun, wait bool
	var lc lifecycle
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "install --token-file FILE",
		Short: "Install or upgrade Nexo Edge (embedded chart) and its connect-token Secret",
		Long: `Installs the chart embedded in this nexoctl with the Helm SDK, or upgrades the release when it
exists (keeping the values it was installed with; --set and --control-plane-url change them), then creates or updates the connect-token Secret with client-go, outside Helm, so the
token never enters a release record. The token file is validated before anything is changed;
--token-file - reads stdin. When the operator is already installed through OLM, only the
installation ConfigMap (nexo-manager-config: --control-plane-url and the environment id) and the
Secrets are applied; a value the Subscription's config.env sets otherwise is refused, naming both.
Re-running is safe.`,
		Example: `  nexoctl install --token-file ./connect-token
  nexoctl install --token-file - --wait --timeout 5m < ./connect-token
  nexoctl install --token-file ./connect-token --dry-run`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.ValidateOutput(); err != nil {
				return err
			}
			if version != "" && version != catalog.BuildVersion {
				return cliopts.Fail(cliopts.ExitFailed, "this nexoctl installs Nexo Edge %s (the chart it embeds), and --version asks for %s: run the nexoctl of release %s "+
					"(nexoctl version prints a nexoctl's own); nothing was changed", catalog.BuildVersion, version, version)
			}
			token, env, warnings, err := readToken(o, tokenFile)
			if err != nil {
				return err
			}
			ns := o.NamespaceOr(cliopts.DefaultNS)
			cfg, err := o.RESTConfig()
			if err != nil {
				return err
			}
			s := Summary{Namespace: ns, ChartVersion: catalog.BuildVersion, Environment: env, TokenSecret: wire.ConnectTokenSecret, Warnings: warnings}
			for _, w := range warnings {
				fmt.Fprintln(o.Err, "warning:", w)
			}
			registry, err := parseRegistrySecrets(registryArgs)
			if err != nil {
				return err
			}
			if controlPlaneURL != "" {
				valueOpts.Values = append(valueOpts.Values, "manager.controlPlaneURL="+controlPlaneURL)
			}
			req := request{namespace: ns, token: token, environment: env, registrySecrets: registry, values: &valueOpts,
				dryRun: dryRun, wait: wait, timeout: timeout, lifecycle: lc}
			if err := install(cmd.Context(), o, cfg, req, &s); err != nil {
				return err
			}
			if o.Output != cliopts.OutputText {
				return o.PrintData(s)
			}
			switch s.Action {
			case "secret-only":
				fmt.Fprintf(o.Out, "The nexo-operator is installed through OLM: only the installation ConfigMap and the Secrets were applied: ConfigMap %s/%s %s; connect token %s/%s %s; trusted keys %s/%s %s.\n",
					ns, wire.InstallConfigMap, s.InstallConfig, ns, wire.ConnectTokenSecret, s.SecretAction, ns, wire.TrustedKeysSecret, s.TrustedKeys)
				if controlPlaneURL == "" {
					fmt.Fprintf(o.Out, "The Control Plane URL was not given: unless the Subscription's config.env sets NEXO_CONTROL_PLANE_URL, run this again with --control-plane-url URL (from the Control Plane's install command); nexoctl preflight says whether the Manager is configured.\n")
				}
			case "dry-run":
				fmt.Fprintf(o.Out, "# Secret %s/%s (connect token for environment %s, not shown) would be created or updated outside Helm.\n", ns, wire.ConnectTokenSecret, env)
			default:
				fmt.Fprintf(o.Out, "Nexo Edge %s %s in namespace %s (release %s); connect-token Secret %s for environment %s.\n", s.ChartVersion, s.Action, ns, s.Release, s.SecretAction, env)
				fmt.Fprintln(o.Out, "Next: nexoctl preflight && nexoctl status -A")
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&tokenFile, "token-file", "", "file holding the connect token from the Control Plane (- reads stdin)")
	f.StringSliceVarP(&valueOpts.ValueFiles, "values", "f", nil, "Helm values files")
	f.StringArrayVar(&valueOpts.Values, "set", nil, "Helm values on the command line (key=value)")
	f.StringArrayVar(&valueOpts.StringValues, "set-string", nil, "Helm values on the command line, always strings (key=value): an environment id of digits stays a string")
	f.StringVar(&version, "version", "", "the bundle version to install (the Control Plane's install command pins it): refused unless it is this nexoctl's own")
	f.StringVar(&controlPlaneURL, "control-plane-url", "", "the Control Plane URL from its install command (sets manager.controlPlaneURL; there is no default)")
	f.StringArrayVar(&registryArgs, "registry-secret", nil, "NAME=FILE: create or update a registry credential Secret (type kubernetes.io/dockerconfigjson, FILE is a .dockerconfigjson) that NexoDeploymentProfiles may name in imagePullSecrets; repeatable. Only Secrets marked this way are ever copied into proxy namespaces")
	f.BoolVar(&dryRun, "dry-run", false, "print the manifests that would be applied (never the token); change nothing")
	f.BoolVar(&wait, "wait", false, "wait until the operator's and the Manager's Deployments are available, showing each")
	f.DurationVar(&timeout, "timeout", 5*time.Minute, "how long --wait waits")
	f.StringVar(&lc.release, "release", ReleaseName, "Helm release name")
	f.BoolVar(&lc.force, "force", false, "install this chart even over a release of a newer chart version (a downgrade)")
	_ = cmd.MarkFlagRequired("token-file")
	return cmd
}

func helmConfig(o *cliopts.Options, ns string) (*action.Configuration, *cli.EnvSettings, error) {
	settings := cli.New()
	settings.SetNamespace(ns)
	cfg := new(action.Configuration)
	if err := cfg.Init(o.KubeIn(ns), ns, "secret", func(string, ...any) {}); err != nil {
		return nil, nil, cliopts.Fail(cliopts.ExitCannot, "helm: %v", err)
	}
	return cfg, settings, nil
}

// lifecycle are the release flags of install.
type lifecycle struct {
	release string
	// force allows installing this chart over a release of a newer one.
	force bool
}

// install runs one request: the pre-install checks, then the Secrets, then the chart (or only
// the Secrets when OLM installed the operator). Its outcome goes into s.
func install(ctx context.Context, o *cliopts.Options, cfg *rest.Config, req request, s *Summary) error {
	ns, release := req.namespace, req.lifecycle.release
	penv, err := preflight.NewClusterEnv(cfg, ns)
	if err != nil {
		return cliopts.Fail(cliopts.ExitCannot, "%v", err)
	}
	olm, err := installedByOLM(ctx, penv)
	if err != nil {
		return cliopts.Fail(cliopts.ExitCannot, "%v", err)
	}
	if !olm {
		// Pre-install checks; a fatal one stops the install before any change.
		report := preflight.Run(ctx, penv, preflight.ClusterCategories(true))
		if report.Status == preflight.Error {
			preflight.PrintText(o.Err, report, false)
			return cliopts.Fail(cliopts.ExitFailed, "pre-install checks failed; nothing was changed")
		}
	}
	hcfg, settings, err := helmConfig(o, ns)
	if err != nil {
		return err
	}
	vals, err := req.values.MergeValues(getter.All(settings))
	if err != nil {
		return cliopts.Fail(cliopts.ExitCannot, "values: %v", err)
	}
	if !olm {
		// A re-install keeps the values of the release (ResetThenReuseValues below): check those
		// with this run's on top.
		effective := vals
		if last, err := action.NewGet(hcfg).Run(release); err == nil && last.Config != nil {
			effective = chartutil.CoalesceTables(copyValues(vals), last.Config)
		}
		if err := needsControlPlaneURL(effective); err != nil {
			return err
		}
		if err := deployNamespacesExist(ctx, penv.Client, effective); err != nil {
			return err
		}
		if err := refuseDowngrade(hcfg, release, req.lifecycle.force); err != nil {
			return err
		}
	}
	// The operator accepts signed manifests only for its own environment: the one in the token.
	if vals["environmentID"] == nil || vals["environmentID"] == "" {
		vals["environmentID"] = req.environment
	}
	chart, err := charts.NexoEdge()
	if err != nil {
		return err
	}
	if req.dryRun {
		inst := action.NewInstall(hcfg)
		// Not client-only: the cluster's real version and APIs decide what renders; nothing is written.
		inst.ReleaseName, inst.Namespace, inst.DryRun, inst.DryRunOption, inst.Replace = release, ns, true, "client", true
		rel, err := inst.RunWithContext(ctx, chart, vals)
		if err != nil {
			return cliopts.Fail(cliopts.ExitFailed, "render the chart: %v", err)
		}
		s.Action, s.SecretAction, s.RenderedBytes = "dry-run", "would-apply", len(rel.Manifest)
		if o.Output == cliopts.OutputText {
			fmt.Fprint(o.Out, rel.Manifest)
		}
		return nil
	}
	if err := ensureNamespace(ctx, penv.Client, ns); err != nil {
		return err
	}
	// On OLM the installation ConfigMap stands in for the chart's values: checked against the
	// Subscription before anything is written.
	var olmConfig installConfig
	if olm {
		url, _, _ := unstructured.NestedString(vals, "manager", "controlPlaneURL")
		envID, _ := vals["environmentID"].(string)
		olmConfig = installConfig{controlPlaneURL: url, environmentID: envID}
		if err := checkSubscription(ctx, penv.Client, ns, olmConfig); err != nil {
			return err
		}
	}
	// The Secrets come first: a first install with --wait waits for a Manager that mounts the
	// token, which could never become ready if the Secret were created after Helm returned.
	if s.SecretAction, err = applyTokenSecret(ctx, penv.Client, ns, req.token); err != nil {
		return err
	}
	for _, rs := range req.registrySecrets {
		action, err := applyRegistrySecret(ctx, penv.Client, ns, rs)
		if err != nil {
			return err
		}
		s.RegistrySecrets = append(s.RegistrySecrets, rs.name+" "+action)
	}
	if olm {
		s.OLM, s.Action = true, "secret-only"
		if s.InstallConfig, err = applyInstallConfig(ctx, penv.Client, ns, olmConfig); err != nil {
			return err
		}
		// The bundle ships no trusted-keys Secret (OLM would replace it on upgrade): the
		// installer makes it, empty, for the Manager to fill, and carries the keys across an
		// upgrade from a bundle that shipped it.
		wait := req.timeout
		if wait < 2*time.Minute {
			wait = 2 * time.Minute
		}
		if s.TrustedKeys, err = EnsureTrustedKeys(ctx, penv.Client, ns, wait); err != nil {
			return err
		}
	} else {
		if _, err := action.NewHistory(hcfg).Run(release); errors.Is(err, driver.ErrReleaseNotFound) {
			inst := action.NewInstall(hcfg)
			// Helm's own wait prints nothing: waitAvailable below shows each component.
			inst.ReleaseName, inst.Namespace, inst.Timeout = release, ns, req.timeout
			if _, err := inst.RunWithContext(ctx, chart, vals); err != nil {
				return cliopts.Fail(cliopts.ExitFailed, "helm install: %v", err)
			}
			s.Action = "installed"
		} else if err != nil {
			return cliopts.Fail(cliopts.ExitCannot, "helm: %v", err)
		} else {
			up := action.NewUpgrade(hcfg)
			// Re-running keeps what the last install set (the Control Plane URL, watched
			// namespaces...) on top of this chart's defaults, so `nexoctl install --token-file NEW`
			// alone rotates the token: helm upgrade --reset-then-reuse-values.
			up.Namespace, up.Timeout, up.ResetThenReuseValues = ns, req.timeout, true
			if _, err := up.RunWithContext(ctx, release, chart, vals); err != nil {
				return cliopts.Fail(cliopts.ExitFailed, "helm upgrade: %v", err)
			}
			s.Action = "upgraded"
		}
		s.Release = release
	}
	if req.wait {
		return waitAvailable(ctx, o, penv.Client, ns, components(vals), req.timeout)
	}
	return nil
}

// installedByOLM reports whether a ClusterServiceVersion of the nexo-operator package exists.
func installedByOLM(ctx context.Context, e *preflight.Env) (bool, error) {
	if _, err := e.Discovery.ServerResourcesForGroupVersion("operators.coreos.com/v1alpha1"); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil // no OLM on this cluster
		}
		return false, err
	}
	list := &unstructured.UnstructuredList{}
	list.SetAPIVersion("operators.coreos.com/v1alpha1")
	list.SetKind("ClusterServiceVersionList")
	if err := e.Client.List(ctx, list); err != nil {
		return false, err
	}
	for _, csv := range list.Items {
		if strings.HasPrefix(csv.GetName(), "nexo-operator.") {
			return true, nil
		}
	}
	return false, nil
}

func ensureNamespace(ctx context.Context, c client.Client, ns string) error {
	err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted", wire.PartOfLabel: wire.PartOf,
	}}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return cliopts.Fail(cliopts.ExitFailed, "create namespace %s: %v", ns, err)
	}
	return nil
}

// applyTokenSecret creates or updates the connect-token Secret. Errors never carry the token.
func applyTokenSecret(ctx context.Context, c client.Client, ns, token string) (string, error) {
	s := &corev1.Secret{}
	err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: wire.ConnectTokenSecret}, s)
	switch {
	case apierrors.IsNotFound(err):
		s = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: wire.ConnectTokenSecret, Namespace: ns, Labels: map[string]string{wire.PartOfLabel: wire.PartOf}},
			Type:       corev1.SecretTypeOpaque,
			Data:       map[string][]byte{wire.ConnectTokenKey: []byte(token)},
		}
		if err := c.Create(ctx, s); err != nil {
			return "", cliopts.Fail(cliopts.ExitFailed, "create Secret %s/%s: %s", ns, wire.ConnectTokenSecret, apierrors.ReasonForError(err))
		}
		return "created", nil
	case err != nil:
		return "", cliopts.Fail(cliopts.ExitFailed, "read Secret %s/%s: %s", ns, wire.ConnectTokenSecret, apierrors.ReasonForError(err))
	case string(s.Data[wire.ConnectTokenKey]) == token:
		return "unchanged", nil
	}
	s.Data = map[string][]byte{wire.ConnectTokenKey: []byte(token)}
	if err := c.Update(ctx, s); err != nil {
		return "", cliopts.Fail(cliopts.ExitFailed, "update Secret %s/%s: %s", ns, wire.ConnectTokenSecret, apierrors.ReasonForError(err))
	}
	return "updated", nil
}

// NewUninstallCmd builds `nexoctl uninstall`.
func NewUninstallCmd(o *cliopts.Options) *cobra.Command {
	var deleteCRDs, yes bool
	release := ReleaseName
	cmd := &cobra.Command{
		Use:   "uninstall",
		Short: "Remove the Nexo Edge release; CRDs and Nexo objects stay unless --delete-crds",
		Long: `Removes the Helm release. Kept, and listed: the CRDs and every Nexo object (unless
--delete-crds), the connect-token Secret and the registry credentials nexoctl install created
outside the release, and the trusted-keys Secret the Manager keeps.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ns := o.NamespaceOr(cliopts.DefaultNS)
			cfg, err := o.RESTConfig()
			if err != nil {
				return err
			}
			hcfg, _, err := helmConfig(o, ns)
			if err != nil {
				return err
			}
			penv, err := preflight.NewClusterEnv(cfg, ns)
			if err != nil {
				return cliopts.Fail(cliopts.ExitCannot, "%v", err)
			}
			_, err = action.NewUninstall(hcfg).Run(release)
			switch {
			case errors.Is(err, driver.ErrReleaseNotFound):
				fmt.Fprintf(o.Out, "no release %s in namespace %s: nothing was removed\n", release, ns)
			case err != nil:
				return cliopts.Fail(cliopts.ExitFailed, "helm uninstall: %v", err)
			default:
				fmt.Fprintf(o.Out, "release %s removed from namespace %s\n", release, ns)
			}
			for _, k := range kept(cmd.Context(), penv.Client, ns, !deleteCRDs) {
				fmt.Fprintln(o.Out, "kept: "+k)
			}
			if !deleteCRDs {
				return nil
			}
			if !yes {
				fmt.Fprintf(o.Out, "Deleting the %d %s CRDs deletes every Nexo object in the cluster. Type yes to continue: ", len(catalog.Kinds), catalog.Group)
				var answer string
				_, _ = fmt.Fscanln(o.In, &answer)
				if answer != "yes" {
					return cliopts.Fail(cliopts.ExitFailed, "not confirmed; the CRDs are kept")
				}
			}
			for _, k := range catalog.Kinds {
				crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: k.CRDName()}}
				if err := penv.Client.Delete(cmd.Context(), crd); err != nil && !apierrors.IsNotFound(err) {
					return cliopts.Fail(cliopts.ExitFailed, "delete CRD %s: %v", k.CRDName(), err)
				}
			}
			fmt.Fprintf(o.Out, "deleted the %d nexo.io CRDs\n", len(catalog.Kinds))
			return nil
		},
	}
	cmd.Flags().BoolVar(&deleteCRDs, "delete-crds", false, fmt.Sprintf("also delete the %d CRDs and with them every Nexo object", len(catalog.Kinds)))
	cmd.Flags().StringVar(&release, "release", ReleaseName, "Helm release name")
	cmd.Flags().BoolVar(&yes, "yes", false, "do not ask for confirmation")
	return cmd
}

// registrySecret is one --registry-secret NAME=FILE.
type registrySecret struct {
	name string
	data []byte
}

func parseRegistrySecrets(args []string) ([]registrySecret, error) {
	var out []registrySecret
	for _, a := range args {
		name, file, ok := strings.Cut(a, "=")
		if !ok || name == "" || file == "" {
			return nil, cliopts.Fail(cliopts.ExitCannot, "--registry-secret %q: want NAME=FILE, for example --registry-secret nexo-registry=$HOME/.docker/config.json", a)
		}
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			return nil, cliopts.Fail(cliopts.ExitCannot, "--registry-secret %s: not a valid Secret name: %s", name, strings.Join(errs, "; "))
		}
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, cliopts.Fail(cliopts.ExitCannot, "--registry-secret %s: %v", name, err)
		}
		var cfg struct {
			Auths map[string]json.RawMessage `json:"auths"`
		}
		if err := json.Unmarshal(data, &cfg); err != nil || len(cfg.Auths) == 0 {
			return nil, cliopts.Fail(cliopts.ExitCannot, "--registry-secret %s: %s is not a Docker config JSON with an \"auths\" object", name, file)
		}
		out = append(out, registrySecret{name: name, data: data})
	}
	return out, nil
}

// applyRegistrySecret creates or updates a shareable registry credential: type
// kubernetes.io/dockerconfigjson with the registry-credential label, the only kind of Secret the
// operator copies into proxy namespaces. An existing Secret of another type is left alone.
func applyRegistrySecret(ctx context.Context, c client.Client, ns string, rs registrySecret) (string, error) {
	s := &corev1.Secret{}
	err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: rs.name}, s)
	labels := map[string]string{wire.PartOfLabel: wire.PartOf, wire.RegistryCredentialLabel: "true"}
	switch {
	case apierrors.IsNotFound(err):
		s = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: rs.name, Namespace: ns, Labels: labels},
			Type:       corev1.SecretTypeDockerConfigJson,
			Data:       map[string][]byte{corev1.DockerConfigJsonKey: rs.data},
		}
		if err := c.Create(ctx, s); err != nil {
			return "", cliopts.Fail(cliopts.ExitFailed, "create Secret %s/%s: %s", ns, rs.name, apierrors.ReasonForError(err))
		}
		return "created", nil
	case err != nil:
		return "", cliopts.Fail(cliopts.ExitFailed, "read Secret %s/%s: %s", ns, rs.name, apierrors.ReasonForError(err))
	case s.Type != corev1.SecretTypeDockerConfigJson:
		return "", cliopts.Fail(cliopts.ExitFailed, "Secret %s/%s exists with type %s; a registry credential must be %s: choose another name or delete it", ns, rs.name, s.Type, corev1.SecretTypeDockerConfigJson)
	case string(s.Data[corev1.DockerConfigJsonKey]) == string(rs.data) && s.Labels[wire.RegistryCredentialLabel] == "true":
		return "unchanged", nil
	}
	s.Data = map[string][]byte{corev1.DockerConfigJsonKey: rs.data}
	if s.Labels == nil {
		s.Labels = map[string]string{}
	}
	for k, v := range labels {
		s.Labels[k] = v
	}
	if err := c.Update(ctx, s); err != nil {
		return "", cliopts.Fail(cliopts.ExitFailed, "update Secret %s/%s: %s", ns, rs.name, apierrors.ReasonForError(err))
	}
	return "updated", nil
}

// needsControlPlaneURL fails, before anything is changed, when the Manager is enabled and no
// Control Plane URL is given: the chart has no default (no historical host is a contract).
func needsControlPlaneURL(vals map[string]any) error {
	mgr, _ := vals["manager"].(map[string]any)
	if enabled, ok := mgr["enabled"].(bool); ok && !enabled {
		return nil
	}
	if u, _ := mgr["controlPlaneURL"].(string); u != "" {
		return nil
	}
	return cliopts.Fail(cliopts.ExitCannot, "no Control Plane URL: pass --control-plane-url with the URL from the Control Plane's install command (or --set manager.enabled=false to install without the Manager); nothing was changed")
}

// deployNamespacesExist checks that every namespace of manager.deployNamespaces exists: the chart
// puts the Manager's write RoleBinding in each, and Helm would fail half-way through otherwise.
func deployNamespacesExist(ctx context.Context, c client.Client, vals map[string]any) error {
	mgr, _ := vals["manager"].(map[string]any)
	if enabled, ok := mgr["enabled"].(bool); ok && !enabled {
		return nil
	}
	list, _ := mgr["deployNamespaces"].([]any)
	var missing []string
	for _, v := range list {
		ns, _ := v.(string)
		if ns == "" || ns == "*" {
			continue
		}
		if err := c.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{}); apierrors.IsNotFound(err) {
			missing = append(missing, ns)
		} else if err != nil {
			return cliopts.Fail(cliopts.ExitCannot, "reading namespace %s (manager.deployNamespaces): %v", ns, err)
		}
	}
	if len(missing) > 0 {
		return cliopts.Fail(cliopts.ExitCannot, "manager.deployNamespaces names %s, which does not exist: create it first (kubectl create namespace %s), since the Manager's write rights are a RoleBinding there; nothing was changed",
			strings.Join(missing, ", "), strings.Join(missing, " "))
	}
	return nil
}

// copyValues copies nested value maps, so merging into the copy leaves vals as given.
func copyValues(vals map[string]any) map[string]any {
	out := make(map[string]any, len(vals))
	for k, v := range vals {
		if m, ok := v.(map[string]any); ok {
			v = copyValues(m)
		}
		out[k] = v
	}
	return out
}

// refuseDowngrade stops an upgrade of a release that runs a newer chart than this nexoctl's,
// unless forced: the newer CRDs and values would meet an older operator.
func refuseDowngrade(hcfg *action.Configuration, release string, force bool) error {
	last, err := action.NewGet(hcfg).Run(release)
	if err != nil || last.Chart == nil || last.Chart.Metadata == nil || force {
		return nil
	}
	// One rule for install and preflight --upgrade: the same version, or one in
	// catalog.UpgradesFrom (docs/upgrade.md).
	edge := upgrade.EdgeFrom(last.Chart.Metadata.Version, catalog.BuildVersion, catalog.UpgradesFrom)
	if edge.OK {
		return nil
	}
	return cliopts.Fail(cliopts.ExitFailed, "release %s runs chart %s: %s. Nothing was changed (--force installs this chart anyway)", release, last.Chart.Metadata.Version, edge.Message)
}

// kept lists what an uninstall leaves in place, with how to remove it.
func kept(ctx context.Context, c client.Client, ns string, crds bool) []string {
	var out []string
	secret := func(name, why string) {
		if c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.Secret{}) == nil {
			out = append(out, fmt.Sprintf("Secret %s/%s (%s; kubectl -n %s delete secret %s)", ns, name, why, ns, name))
		}
	}
	secret(wire.ConnectTokenSecret, "the connect token, created outside the release")
	secret(wire.TrustedKeysSecret, "the Control Plane's signing keys, kept current by the Manager")
	var registry corev1.SecretList
	if c.List(ctx, &registry, client.InNamespace(ns), client.MatchingLabels{wire.RegistryCredentialLabel: "true"}) == nil {
		for _, s := range registry.Items {
			secret(s.Name, "a registry credential from nexoctl install --registry-secret")
		}
	}
	if crds {
		out = append(out, fmt.Sprintf("the %d nexo.io CRDs and every Nexo object (nexoctl uninstall --delete-crds removes them, and the objects with them)", len(catalog.Kinds)))
	}
	return out
}
