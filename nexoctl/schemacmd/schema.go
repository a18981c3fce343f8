// Package schemacmd is `nexoctl schema diff`: the schema section of release notes, and what an
// upgrade changes, from two sets of Nexo CRDs.
package schemacmd

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/nexo-io/nexo-edge/catalog"
	"github.com/nexo-io/nexo-edge/config/crd"
	"github.com/nexo-io/nexo-edge/contract/fingerprint"
	"github.com/nexo-io/nexo-edge/nexoctl/cliopts"
	"github.com/nexo-io/nexo-edge/preflight"
	"github.com/nexo-io/nexo-edge/preflight/schemadiff"
)

// OutputMarkdown is the -o value for release notes.
const OutputMarkdown = "markdown"

// NewCmd builds `nexoctl schema` and its diff subcommand.
func NewCmd(o *cliopts.Options) *cobra.Command {
	schema := &cobra.Command{Use: "schema", Short: "Compare Nexo CRD schemas (release notes, upgrades)"}
	diff := &cobra.Command{
		Use:   "diff OLD NEW",
		Short: "Classify every schema change between two sets of Nexo CRDs",
		Long: `Compares two sets of Nexo CRDs and reports the kinds added or removed, support changes
(reconciled ↔ schema-only) and every field change, each named by its rule (crdify's names where
it has one: existingFieldRemoval, type, enum, required, default, maximum, minimum, maxLength,
storedVersionRemoval, ...) and classified breaking, risky or safe, with the migration it needs
and the rollback constraint it creates. OLD and NEW are each a release folder (releases/0.2.0),
a bundle folder, a folder of CRD files, "cluster" (the CRDs installed in the current cluster) or
"build" (this nexoctl's own). -o markdown prints the release-notes section.`,
		Example: `  nexoctl schema diff releases/0.2.0 build
  nexoctl schema diff cluster build -o markdown`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.Output != OutputMarkdown {
				if err := o.ValidateOutput(); err != nil {
					return cliopts.Fail(cliopts.ExitCannot, "%v (or markdown)", err)
				}
			}
			old, err := Load(cmd.Context(), o, args[0])
			if err != nil {
				return err
			}
			next, err := Load(cmd.Context(), o, args[1])
			if err != nil {
				return err
			}
			r := schemadiff.Compare(args[0], old, args[1], next)
			switch o.Output {
			case OutputMarkdown:
				_, err = fmt.Fprint(o.Out, r.Markdown())
				return err
			case cliopts.OutputText:
				r.WriteText(o.Out)
				return nil
			}
			return o.PrintData(r)
		},
	}
	schema.AddCommand(diff)
	return schema
}

// Load reads a set of Nexo CRDs by kind: "cluster", "build", or a folder.
func Load(ctx context.Context, o *cliopts.Options, source string) (map[string]*apiextensionsv1.CustomResourceDefinition, error) {
	switch source {
	case "build":
		return crd.ByKind()
	case "cluster":
		cfg, err := o.RESTConfig()
		if err != nil {
			return nil, err
		}
		env, err := preflight.NewClusterEnv(cfg, cliopts.DefaultNS)
		if err != nil {
			return nil, cliopts.Fail(cliopts.ExitCannot, "%v", err)
		}
		list, err := fingerprint.NexoCRDs(ctx, env.Client)
		if err != nil {
			return nil, cliopts.Fail(cliopts.ExitCannot, "read the installed CRDs: %v", err)
		}
		if len(list) == 0 {
			return nil, cliopts.Fail(cliopts.ExitFailed, "no %s CRDs are installed in this cluster", catalog.Group)
		}
		out := map[string]*apiextensionsv1.CustomResourceDefinition{}
		for i := range list {
			out[list[i].Spec.Names.Kind] = &list[i]
		}
		return out, nil
	}
	out, err := schemadiff.LoadDir(source)
	if err != nil {
		hint := ""
		if !strings.Contains(source, "/") {
			hint = ` (or "cluster", or "build")`
		}
		return nil, cliopts.Fail(cliopts.ExitCannot, "%v%s", err, hint)
	}
	return out, nil
}
