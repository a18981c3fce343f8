// Package versioncmd is `nexoctl version`.
package versioncmd

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/nexo-io/nexo-edge/catalog"
	"github.com/nexo-io/nexo-edge/internal/nexoctl/cliopts"
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
			info := Info{Client: catalog.BuildVersion}
			if !clientOnly {
				info.Operator, info.OperatorError = operatorVersion(cmd, o)
			}
			if o.Output != cliopts.OutputText {
				return o.PrintData(info)
			}
			fmt.Fprintf(o.Out, "nexoctl:  %s\n", info.Client)
			if !clientOnly {
				if info.Operator != "" {
					fmt.Fprintf(o.Out, "operator: %s\n", info.Operator)
				} else {
					fmt.Fprintf(o.Out, "operator: unknown (%s)\n", info.OperatorError)
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&clientOnly, "client", false, "print only nexoctl's version")
	return cmd
}

func operatorVersion(cmd *cobra.Command, o *cliopts.Options) (string, string) {
	cfg, err := o.RESTConfig()
	if err != nil {
		return "", err.Error()
	}
	env, err := preflight.NewClusterEnv(cfg, o.NamespaceOr(cliopts.DefaultNS))
	if err != nil {
		return "", err.Error()
	}
	v, err := env.OperatorVersionInCluster(cmd.Context())
	if err != nil {
		return "", err.Error()
	}
	if v == "" {
		return "", "no nexo-operator Deployment in namespace " + env.Namespace
	}
	return v, ""
}
