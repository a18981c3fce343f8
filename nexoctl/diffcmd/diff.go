// Package diffcmd is `nexoctl diff`: what applying Nexo manifests would do in the cluster,
// computed by the cluster (a server-side dry run) and the operator's rendering, with the
// caller's own credentials. It is the answer a Control Plane preview gets from the Manager
// (package preview, one code path), from a terminal, with kubectl diff's exit codes.
package diffcmd

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/catalog"
	"github.com/nexo-io/nexo-edge/contract/manifest"
	"github.com/nexo-io/nexo-edge/contract/protocol"
	"github.com/nexo-io/nexo-edge/contract/scheme"
	"github.com/nexo-io/nexo-edge/nexoctl/cliopts"
	"github.com/nexo-io/nexo-edge/preview"
)

// NewCmd builds `nexoctl diff`.
func NewCmd(o *cliopts.Options) *cobra.Command {
	var file, fieldManager, productNamespace string
	cmd := &cobra.Command{
		Use:   "diff -f FILE|DIR [-n NAMESPACE]",
		Short: "What applying Nexo manifests would change, computed by the cluster: objects field by field, proxies' graph revisions and pod rolls",
		Long: "Runs a server-side dry run of every manifest (admission, the CRD's schema and CEL rules, field ownership) and renders\n" +
			"every NexoProxy the manifests touch with the operator's own rendering, before and after: nothing is written and no\n" +
			"Secret is read. The Control Plane's previews give the same answer through the Manager.\n\n" +
			"Exit status, as kubectl diff's: 0 nothing would change, 1 something would change or be refused, 2 nexoctl could not tell.",
		Example: "  nexoctl diff -f ./shop/ -n shop\n  nexoctl diff -f revision.yaml -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.ValidateOutput(); err != nil {
				return err
			}
			objs, err := manifest.Load(file, o.In)
			if err != nil {
				return cliopts.Fail(cliopts.ExitCannot, "read %s: %v", file, err)
			}
			if len(objs) == 0 {
				return cliopts.Fail(cliopts.ExitCannot, "%s holds no manifests", file)
			}
			ns, err := o.ContextNamespace()
			if err != nil {
				return err
			}
			for i, u := range objs {
				if _, ok := catalog.Lookup(u.GetKind()); !ok || u.GroupVersionKind().Group != catalog.Group {
					return cliopts.Fail(cliopts.ExitCannot, "%s object %d is %s %s, not a Nexo kind: nexoctl diff previews nexo.io objects (kubectl diff shows the others)", file, i+1, u.GetKind(), u.GetName())
				}
				if u.GetNamespace() == "" {
					u.SetNamespace(ns)
				}
			}
			cfg, err := o.RESTConfig()
			if err != nil {
				return err
			}
			c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
			if err != nil {
				return cliopts.Fail(cliopts.ExitCannot, "connect to the cluster: %v", err)
			}
			res, err := preview.Run(cmd.Context(), c, objs, preview.Options{FieldManager: fieldManager, OperatorNamespace: productNamespace,
				Proxies: func(ctx context.Context, namespace string) ([]nexov1alpha1.NexoProxy, error) {
					var list nexov1alpha1.NexoProxyList
					err := c.List(ctx, &list, client.InNamespace(namespace))
					return list.Items, err
				}})
			if err != nil {
				return cliopts.Fail(cliopts.ExitCannot, "%v", err)
			}
			if o.Output != cliopts.OutputText {
				if err := o.PrintData(res); err != nil {
					return err
				}
			} else if err := printResult(o, res); err != nil {
				return err
			}
			if res.Changes() {
				return cliopts.Exit(cliopts.ExitFailed) // the summary said what changes
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&file, "filename", "f", "", "manifests: a file or folder, - for stdin")
	cmd.Flags().StringVar(&fieldManager, "field-manager", "nexoctl", "the field manager the dry run applies as (the one your apply uses decides field ownership as it would)")
	cmd.Flags().StringVar(&productNamespace, "product-namespace", "nexo-system", "where Nexo Edge is installed (the profiles' image-pull Secrets live there)")
	_ = cmd.MarkFlagRequired("filename")
	return cmd
}

func summary(r *protocol.PreviewResult) string {
	s := r.Summary
	return fmt.Sprintf("%d created, %d changed, %d unchanged, %d refused; %d proxies roll, %d refused", s.Created, s.Changed, s.Unchanged, s.Refused, s.Rolls, s.ProxiesRefused)
}

// printResult writes the objects, then the proxies, as tables; a changed object lists its fields.
func printResult(o *cliopts.Options, r *protocol.PreviewResult) error {
	tw := tabwriter.NewWriter(o.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "OBJECT\tOUTCOME\tDETAIL")
	for _, x := range r.Objects {
		fmt.Fprintf(tw, "%s %s/%s\t%s\t%s\n", x.Kind, x.Namespace, x.Name, x.Outcome, orDash(x.Reason))
		for _, c := range x.Changes {
			v := ""
			if c.Value != nil {
				b, _ := json.Marshal(c.Value)
				v = " = " + string(b)
			}
			fmt.Fprintf(tw, "\t\t%s %s%s\n", c.Op, c.Path, v)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(r.Proxies) > 0 {
		fmt.Fprintln(o.Out)
		tw = tabwriter.NewWriter(o.Out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "PROXY\tGRAPH REVISION\tPODS\tWHY")
		for _, p := range r.Proxies {
			fmt.Fprintf(tw, "%s/%s\t%s → %s\t%s\t%s\n", p.Namespace, p.Name, orDash(p.Before), orDash(p.After), p.Outcome, orDash(p.Why))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if r.Truncated != "" {
		fmt.Fprintln(o.Out, r.Truncated)
	}
	fmt.Fprintln(o.Out, summary(r))
	return nil
}

func orDash(s string) string {
	if strings.TrimSpace(s) == "" {
		return "-"
	}
	return s
}
