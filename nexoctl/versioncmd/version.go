// Package versioncmd is `nexoctl version`.
package versioncmd

import (
	"fmt"

	"github.com/nexo-io/nexo-edge/contract/buildinfo"

	"github.com/spf13/cobra"

	"github.com/nexo-io/nexo-edge/nexoctl/cliopts"
	"github.com/nexo-io/nexo-edge/preflight"
)

// Info is what `nexoctl version -o json` prints.
type Info struct {
	Client   string `json:"client"`
	Operator string `json:"operator,omitempty"`
	// OperatorError says why the operator version is unknown.
	OperatorError string `json:"operatorError,omitempty"`
}

// NewCmd builds the command.
func NewCmd(o *cliopts.Options) *cobra.Command {
	var clientOnly bool
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print nexoctl's version and the version of the operator it finds",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.ValidateOutput(); err != nil {
				return err
			}
			info := Info{Client: buildinfo.String()}
			reached := true
			if !clientOnly {
				info.Operator, info.OperatorError, reached = operatorVersion(cmd, o)
			}
			// After printing, a cluster that could not be reached exits 2, as in every verb.
			unreachable := func(err error) error {
				if err == nil && !reached {
					return cliopts.Fail(cliopts.ExitCannot, "cannot reach the cluster: %s (nexoctl version --client prints only nexoctl's version)", info.OperatorError)
				}
				return err
			}
			if o.Output != cliopts.OutputText {
				return unreachable(o.PrintData(info))
			}
			fmt.Fprintf(o.Out, "nexoctl:  %s\n", info.Client)
			if !clientOnly {
				if info.Operator != "" {
					fmt.Fprintf(o.Out, "operator: %s\n", info.Operator)
				} else {
					fmt.Fprintf(o.Out, "operator: unknown (%s)\n", info.OperatorError)
				}
			}
			return unreachable(nil)
		},
	}
	cmd.Flags().BoolVar(&clientOnly, "client", false, "print only nexoctl's version")
	return cmd
}

// operatorVersion finds the installed operator's version; reached is false when the cluster
// could not be asked at all.
func operatorVersion(cmd *cobra.Command, o *cliopts.Options) (version, problem string, reached bool) {
	cfg, err := o.RESTConfig()
	if err != nil {
		return "", err.Error(), false
	}
	env, err := preflight.NewClusterEnv(cfg, o.NamespaceOr(cliopts.DefaultNS))
	if err != nil {
		return "", err.Error(), false
	}
	if _, err := env.Discovery.ServerVersion(); err != nil {
		return "", err.Error(), false
	}
	v, err := env.OperatorVersionInCluster(cmd.Context())
	if err != nil {
		return "", err.Error(), true
	}
	if v == "" {
		return "", "no nexo-operator Deployment in namespace " + env.Namespace, true
	}
	return v, "", true
}
