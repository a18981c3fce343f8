// Package preflightcmd is `nexoctl preflight`.
package preflightcmd

import (
	"context"
	"errors"
	"io"

	"github.com/spf13/cobra"

	"github.com/nexo-io/nexo-edge/config/crd"
	"github.com/nexo-io/nexo-edge/nexoctl/cliopts"
	"github.com/nexo-io/nexo-edge/nexoctl/progress"
	"github.com/nexo-io/nexo-edge/preflight"
	"github.com/nexo-io/nexo-edge/preflight/upgrade"
)

// NewCmd builds the command.
func NewCmd(o *cliopts.Options) *cobra.Command {
	var pre, upgrading bool
	var dir string
	cmd := &cobra.Command{
		Use:   "preflight",
		Short: "Check the cluster (or a folder of manifests) for everything Nexo Edge needs",
		Long: `Runs ordered categories of checks: the Kubernetes API, the nexo.io CRDs and their schema
fingerprint, the support matrix of the running operator (which kinds it reconciles and which are
schema-only, objects of schema-only kinds, pipelines referencing kinds that can never be Ready),
the operator and Manager, the connect-token Secret and image pinning.

With --pre it checks what an install needs instead (permissions). With -f DIR it checks a folder
of manifests offline: the support matrix, references and image pinning.

With --upgrade it says what upgrading to this nexoctl's version would do: whether an upgrade
edge exists from the installed version, every schema change from the installed CRDs, every live
Nexo object the new schemas would reject (OpenAPI validation, CEL rules) or silently prune (data
loss), new defaults, stored versions that would vanish, and which NexoProxies would roll.

Exit codes: 0 all checks passed (warnings allowed), 1 a check failed, 2 could not run.`,
		Example: `  nexoctl preflight
  nexoctl preflight --pre -n nexo-system
  nexoctl preflight -f ./manifests -o json
  nexoctl preflight --upgrade`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.ValidateOutput(); err != nil {
				return err
			}
			if upgrading {
				return runUpgrade(cmd.Context(), o)
			}
			var env *preflight.Env
			var cats []preflight.Category
			if dir != "" {
				var err error
				if env, err = preflight.LoadDir(dir, o.In); err != nil {
					return cliopts.Fail(cliopts.ExitCannot, "%v", err)
				}
				cats = preflight.OfflineCategories()
			} else {
				cfg, err := o.RESTConfig()
				if err != nil {
					return err
				}
				if env, err = preflight.NewClusterEnv(cfg, o.NamespaceOr(cliopts.DefaultNS)); err != nil {
					return cliopts.Fail(cliopts.ExitCannot, "%v", err)
				}
				cats = preflight.ClusterCategories(pre)
			}
			progressOpts, stopProgress := spinner(o)
			report := preflight.RunWith(cmd.Context(), env, cats, progressOpts)
			stopProgress()
			if res, _ := report.ByID("api-reachable"); res.Status == preflight.Error {
				// The same exit code as every verb that cannot reach the cluster.
				return cliopts.Fail(cliopts.ExitCannot, "cannot reach the Kubernetes API: %s (%s)", res.Message, res.Hint)
			}
			if o.Output == cliopts.OutputText {
				preflight.PrintText(o.Out, report, o.Color())
			} else if err := o.PrintData(report); err != nil {
				return err
			}
			if report.Status == preflight.Error {
				return &cliopts.ExitError{Code: cliopts.ExitFailed, Err: errChecksFailed}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&pre, "pre", false, "check what an install needs (permissions) instead of the installed state")
	cmd.Flags().BoolVar(&upgrading, "upgrade", false, "check what upgrading the installed release to this nexoctl's version would do (exit 1 when something breaks)")
	cmd.MarkFlagsMutuallyExclusive("upgrade", "pre")
	cmd.Flags().StringVarP(&dir, "filename", "f", "", "check manifests offline, without a cluster: a folder, a file, or - for stdin")
	return cmd
}

// runUpgrade is preflight --upgrade.
func runUpgrade(ctx context.Context, o *cliopts.Options) error {
	cfg, err := o.RESTConfig()
	if err != nil {
		return err
	}
	ns := o.NamespaceOr(cliopts.DefaultNS)
	env, err := preflight.NewClusterEnv(cfg, ns)
	if err != nil {
		return cliopts.Fail(cliopts.ExitCannot, "%v", err)
	}
	build, err := crd.ByKind()
	if err != nil {
		return err
	}
	r, err := upgrade.Run(ctx, env.Client, ns, build)
	if err != nil {
		return cliopts.Fail(cliopts.ExitCannot, "%v", err)
	}
	if o.Output == cliopts.OutputText {
		r.WriteText(o.Out)
	} else if err := o.PrintData(r); err != nil {
		return err
	}
	if r.Breaking {
		return &cliopts.ExitError{Code: cliopts.ExitFailed, Err: errUpgradeBreaks}
	}
	return nil
}

var errUpgradeBreaks = errors.New("the upgrade would break something; see above")

// spinner shows, on a terminal, which check is being retried; nothing otherwise. Stop it when
// the checks are done.
func spinner(o *cliopts.Options) (preflight.RunOptions, func()) {
	return spinnerTo(o.Err, o.Output == cliopts.OutputText && o.ErrIsTerminal())
}

// spinnerTo shows the check being retried on w (a terminal) when on is true: one progress line
// behind a spinner, gone when the check ends.
func spinnerTo(w io.Writer, on bool) (preflight.RunOptions, func()) {
	if !on {
		return preflight.RunOptions{}, func() {}
	}
	d := progress.Start(w, progress.Options{Terminal: true})
	return preflight.RunOptions{
		OnRetry: func(c preflight.Check) { d.Set([]progress.Item{{Name: c.Description, State: "(retrying)"}}) },
		OnDone:  func(preflight.Check) { d.Set(nil) },
	}, d.Stop
}

type checksFailed struct{}

func (checksFailed) Error() string { return "preflight checks failed" }

var errChecksFailed = checksFailed{}
