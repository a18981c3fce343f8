// Package nexoctl assembles the nexoctl command line; each verb lives in its own package.
package nexoctl

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/nexo-io/nexo-edge/nexoctl/cliopts"
	"github.com/nexo-io/nexo-edge/nexoctl/diffcmd"
	"github.com/nexo-io/nexo-edge/nexoctl/installcmd"
	"github.com/nexo-io/nexo-edge/nexoctl/preflightcmd"
	"github.com/nexo-io/nexo-edge/nexoctl/schemacmd"
	"github.com/nexo-io/nexo-edge/nexoctl/signcmd"
	"github.com/nexo-io/nexo-edge/nexoctl/statuscmd"
	"github.com/nexo-io/nexo-edge/nexoctl/supportcmd"
	"github.com/nexo-io/nexo-edge/nexoctl/versioncmd"
)

// NewRootCmd builds nexoctl with its global flags.
func NewRootCmd(o *cliopts.Options) *cobra.Command {
	root := &cobra.Command{
		Use:           "nexoctl",
		Short:         "Install, check and inspect Nexo Edge on Kubernetes",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	f := root.PersistentFlags()
	o.Kube.AddFlags(f)
	f.Lookup("namespace").Usage = "namespace: of the proxies for status (default: the kubeconfig context's), of the product for install and checks (default nexo-system)"
	f.BoolVarP(&o.AllNamespaces, "all-namespaces", "A", false, "across all namespaces")
	f.StringVarP(&o.Output, "output", "o", cliopts.OutputText, "output format: text, json or yaml")

	root.AddGroup(&cobra.Group{ID: "install", Title: "Installation:"}, &cobra.Group{ID: "checks", Title: "Checks:"}, &cobra.Group{ID: "gitops", Title: "Signed manifests:"})
	inst, uninst := installcmd.NewCmd(o), installcmd.NewUninstallCmd(o)
	inst.GroupID, uninst.GroupID = "install", "install"
	pre, status := preflightcmd.NewCmd(o), statuscmd.NewCmd(o)
	pre.GroupID, status.GroupID = "checks", "checks"
	sign, verify, diff := signcmd.NewSignCmd(o), signcmd.NewVerifyCmd(o), diffcmd.NewCmd(o)
	sign.GroupID, verify.GroupID, diff.GroupID = "gitops", "gitops", "gitops"
	support := supportcmd.NewCmd(o)
	support.GroupID = "checks"
	schema := schemacmd.NewCmd(o)
	schema.GroupID = "checks"
	root.AddCommand(inst, uninst, pre, status, support, sign, verify, diff, schema, versioncmd.NewCmd(o))
	registerCompletions(root, status, o)
	return root
}

// Main runs nexoctl and returns its exit code.
func Main(ctx context.Context, args []string, in io.Reader, out, errOut io.Writer) int {
	o := cliopts.New(in, out, errOut)
	root := NewRootCmd(o)
	root.SetArgs(args)
	root.SetIn(in)
	root.SetOut(out)
	root.SetErr(errOut)
	err := root.ExecuteContext(ctx)
	code := cliopts.Code(err)
	if err != nil && !cliopts.Said(err) && (code != cliopts.ExitFailed || o.Output == cliopts.OutputText) {
		fmt.Fprintln(errOut, "Error:", err)
	}
	return code
}
