package cli

import (
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nexo-io/nexo-edge/controlplane/storage"

	"github.com/spf13/cobra"

	"github.com/nexo-io/nexo-edge/contract/manifest"
	"github.com/nexo-io/nexo-edge/controlplane"
	"github.com/nexo-io/nexo-edge/controlplane/targeting"
)

// pairs parses key=value arguments into labels; an argument without "=" is refused (selectors
// and labels are exact pairs, not expressions).
func pairs(args []string) (map[string]string, error) {
	out := map[string]string{}
	for _, a := range args {
		for _, p := range strings.Split(a, ",") {
			k, v, ok := strings.Cut(p, "=")
			if !ok || k == "" {
				return nil, fmt.Errorf("%q is not key=value (labels and selectors are exact pairs, not expressions)", p)
			}
			out[k] = v
		}
	}
	return out, nil
}

// writeSecret writes a token to file (0600), or prints it when file is empty.
func writeSecret(out io.Writer, what, token, file string) error {
	if file == "" {
		fmt.Fprintf(out, "%s (only shown this once):\n%s\n", what, token)
		return nil
	}
	if err := os.WriteFile(file, []byte(token), 0o600); err != nil {
		return err
	}
	fmt.Fprintf(out, "%s written to %s (only shown this once)\n", what, file)
	return nil
}

// tenancyCmds are the tenancy commands (docs/controlplane.md, "Targeting").
func tenancyCmds(out io.Writer, call caller) []*cobra.Command {
	var tenant, project, tokenOut string
	tenantFlag := func(c *cobra.Command) {
		c.Flags().StringVar(&tenant, "tenant", "", "the tenant")
		_ = c.MarkFlagRequired("tenant")
	}
	projectFlag := func(c *cobra.Command) {
		tenantFlag(c)
		c.Flags().StringVar(&project, "project", "", "the project")
		_ = c.MarkFlagRequired("project")
	}
	base := func() string { return "/admin/tenants/" + tenant }

	tenantCmd := &cobra.Command{Use: "tenant", Short: "Tenants (the admin token)"}
	tenantCmd.AddCommand(&cobra.Command{
		Use: "create NAME", Short: "Create a tenant", Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			if err := call("POST", "/admin/tenants", map[string]string{"name": args[0]}, nil); err != nil {
				return err
			}
			fmt.Fprintf(out, "tenant %s created\n", args[0])
			return nil
		},
	})

	var maxProxies int
	var expires string
	entitle := &cobra.Command{
		Use: "entitlement NAME [--max-proxies N --expires DATE]", Short: "Show a tenant's license entitlement, or set it (the admin token): the proxies a deploy through a stage may bring it to, and until when",
		Args: cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			path := "/admin/tenants/" + args[0] + "/entitlement"
			var e targeting.Entitlement
			if c.Flags().Changed("max-proxies") || c.Flags().Changed("expires") {
				at, err := time.Parse(time.RFC3339, expires)
				if err != nil {
					if at, err = time.Parse(time.DateOnly, expires); err != nil {
						return fmt.Errorf("--expires %q: want a date (2027-12-31) or an RFC 3339 time", expires)
					}
				}
				if err := call("PUT", path, targeting.Entitlement{MaxProxies: maxProxies, ExpiresAt: at}, &e); err != nil {
					return err
				}
			} else if err := call("GET", path, nil, &e); err != nil {
				return err
			}
			fmt.Fprintf(out, "tenant %s: at most %d proxies, until %s\n", args[0], e.MaxProxies, e.ExpiresAt.UTC().Format(time.RFC3339))
			return nil
		},
	}
	entitle.Flags().IntVar(&maxProxies, "max-proxies", 0, "the most proxies the tenant's environments may run, counted as they report them")
	entitle.Flags().StringVar(&expires, "expires", "", "when the entitlement ends (2027-12-31, or an RFC 3339 time)")
	tenantCmd.AddCommand(entitle)

	var tokenLife time.Duration
	principal := &cobra.Command{Use: "principal", Short: "Principals: people and pipelines with their own API tokens"}
	pcreate := &cobra.Command{
		Use: "create NAME --tenant T [--token-out FILE]", Short: "Create a principal; its token is shown once", Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			var p controlplane.NewPrincipal
			if err := call("POST", base()+"/principals", map[string]any{"name": args[0], "expiresInSeconds": int64(tokenLife.Seconds())}, &p); err != nil {
				return err
			}
			return writeSecret(out, fmt.Sprintf("principal %s/%s; its token", tenant, p.Name), p.Token, tokenOut)
		},
	}
	tenantFlag(pcreate)
	pcreate.Flags().StringVar(&tokenOut, "token-out", "", "write the token to this file (mode 0600) instead of printing it")
	var role, bindProject string
	bind := &cobra.Command{
		Use: "bind NAME --tenant T --role ROLE [--project P]", Short: "Bind a principal to a role: tenant-admin (tenant-wide), or project-manager, editor or viewer in a project",
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			if err := call("POST", base()+"/role-bindings", map[string]string{"principal": args[0], "role": role, "project": bindProject}, nil); err != nil {
				return err
			}
			fmt.Fprintf(out, "%s/%s is %s in %s\n", tenant, args[0], role, orTenant(bindProject))
			return nil
		},
	}
	tenantFlag(bind)
	bind.Flags().StringVar(&role, "role", "", fmt.Sprintf("one of %v", targeting.Roles))
	bind.Flags().StringVar(&bindProject, "project", "", "the project (not for tenant-admin)")
	_ = bind.MarkFlagRequired("role")
	pcreate.Flags().DurationVar(&tokenLife, "expires-in", 0, "how long the token lasts (default 90 days, at most 366 days: 8784h)")
	var unbindProject string
	unbind := &cobra.Command{
		Use: "unbind NAME --tenant T --role ROLE [--project P]", Short: "Remove a principal's role; it no longer applies from the principal's next request",
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			path := base() + "/principals/" + url.PathEscape(args[0]) + "/role-bindings/" + url.PathEscape(role)
			if unbindProject != "" {
				path += "?project=" + url.QueryEscape(unbindProject)
			}
			if err := call("DELETE", path, nil, nil); err != nil {
				return err
			}
			fmt.Fprintf(out, "%s/%s is no longer %s in %s\n", tenant, args[0], role, orTenant(unbindProject))
			return nil
		},
	}
	tenantFlag(unbind)
	unbind.Flags().StringVar(&role, "role", "", fmt.Sprintf("one of %v", targeting.Roles))
	unbind.Flags().StringVar(&unbindProject, "project", "", "the project (not for tenant-admin)")
	_ = unbind.MarkFlagRequired("role")
	pdelete := &cobra.Command{
		Use: "delete NAME --tenant T", Short: "Delete a principal and its bindings; its token is refused from its next request", Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			if err := call("DELETE", base()+"/principals/"+url.PathEscape(args[0]), nil, nil); err != nil {
				return err
			}
			fmt.Fprintf(out, "principal %s/%s deleted; its token no longer works\n", tenant, args[0])
			return nil
		},
	}
	tenantFlag(pdelete)
	protate := &cobra.Command{
		Use: "rotate-token NAME --tenant T [--token-out FILE] [--expires-in D]", Short: "Issue a principal a new token (shown once); the old one is refused from its next request",
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			var p controlplane.NewPrincipal
			if err := call("POST", base()+"/principals/"+url.PathEscape(args[0])+"/token", controlplane.TokenLifetime{ExpiresInSeconds: int64(tokenLife.Seconds())}, &p); err != nil {
				return err
			}
			return writeSecret(out, fmt.Sprintf("principal %s/%s; its new token (expires %s)", tenant, p.Name, p.TokenExpiresAt.Format(time.RFC3339)), p.Token, tokenOut)
		},
	}
	tenantFlag(protate)
	protate.Flags().StringVar(&tokenOut, "token-out", "", "write the token to this file (mode 0600) instead of printing it")
	protate.Flags().DurationVar(&tokenLife, "expires-in", 0, "how long the token lasts (default 90 days, at most 366 days: 8784h)")
	plist := &cobra.Command{
		Use: "list --tenant T", Short: "A tenant's principals, their roles and when their tokens expire (for review)", Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			var resp struct {
				Principals []storage.Principal `json:"principals"`
			}
			if err := call("GET", base()+"/principals", nil, &resp); err != nil {
				return err
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tROLES\tCREATED\tTOKEN EXPIRES")
			for _, p := range resp.Principals {
				var roles []string
				for _, b := range p.Bindings {
					scope := b.Project
					if scope == "" {
						scope = "tenant"
					}
					roles = append(roles, string(b.Role)+"@"+scope)
				}
				if len(roles) == 0 {
					roles = []string{"-"}
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", p.Name, strings.Join(roles, ","), p.Created.UTC().Format(time.RFC3339), p.TokenExpiresAt.UTC().Format(time.RFC3339))
			}
			return tw.Flush()
		},
	}
	tenantFlag(plist)
	principal.AddCommand(pcreate, bind, unbind, pdelete, protate, plist)

	projectCmd := &cobra.Command{Use: "project", Short: "Projects of a tenant"}
	pc := &cobra.Command{
		Use: "create NAME --tenant T", Short: "Create a project", Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			if err := call("POST", base()+"/projects", map[string]string{"name": args[0]}, nil); err != nil {
				return err
			}
			fmt.Fprintf(out, "project %s/%s created\n", tenant, args[0])
			return nil
		},
	}
	tenantFlag(pc)
	projectCmd.AddCommand(pc)

	stage := &cobra.Command{Use: "stage", Short: "A project's stages: where they deploy, and deploying through them"}
	var envSel, nsSel []string
	var promotesFrom string
	var soak time.Duration
	var approval bool
	set := &cobra.Command{
		Use: "set NAME --tenant T --project P --environments k=v[,k=v] --namespaces k=v[,k=v]", Short: "Create or replace a stage's selectors (exact labels)",
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			envs, err := pairs(envSel)
			if err != nil {
				return err
			}
			nss, err := pairs(nsSel)
			if err != nil {
				return err
			}
			spec := controlplane.StageSpec{Environments: envs, Namespaces: nss, PromotesFrom: promotesFrom, SoakSeconds: int64(soak.Seconds()), RequiresApproval: approval}
			if err := call("PUT", base()+"/projects/"+project+"/stages/"+args[0], spec, nil); err != nil {
				return err
			}
			fmt.Fprintf(out, "stage %s/%s/%s selects environments %s and namespace targets %s\n", tenant, project, args[0], targeting.Selector(envs), targeting.Selector(nss))
			if promotesFrom != "" {
				fmt.Fprintf(out, "it takes revisions by promotion from stage %s after %s Synced there%s\n", promotesFrom, soak, map[bool]string{true: ", with a project manager's approval", false: ""}[approval])
			}
			return nil
		},
	}
	projectFlag(set)
	set.Flags().StringSliceVar(&envSel, "environments", nil, "the environment selector, key=value pairs")
	set.Flags().StringSliceVar(&nsSel, "namespaces", nil, "the namespace-target selector, key=value pairs")
	set.Flags().StringVar(&promotesFrom, "promotes-from", "", "the stage this one takes revisions from (promote); a direct deploy is then refused")
	set.Flags().DurationVar(&soak, "soak", 0, "with --promotes-from: how long a revision must have been Synced on every environment of that stage")
	set.Flags().BoolVar(&approval, "requires-approval", false, "with --promotes-from: a project manager other than the promoter approves each promotion")
	targetsCmd := &cobra.Command{
		Use: "targets NAME --tenant T --project P", Short: "Every environment and namespace target: eligible, deployable, and why not", Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			var res struct{ Targets []targeting.Target }
			if err := call("GET", base()+"/projects/"+project+"/stages/"+args[0]+"/targets", nil, &res); err != nil {
				return err
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ENVIRONMENT\tNAMESPACE\tELIGIBLE\tDEPLOYABLE\tWHY NOT")
			for _, t := range res.Targets {
				fmt.Fprintf(tw, "%s\t%s\t%v\t%v\t%s\n", t.Environment, orDash(t.Namespace), t.Eligible, t.Deployable, orDash(strings.Join(t.Reasons, "; ")))
			}
			return tw.Flush()
		},
	}
	projectFlag(targetsCmd)
	var env, ns, file, image, proxy string
	var revision int64
	var message string
	var override bool
	deploy := &cobra.Command{
		Use: "deploy NAME --tenant T --project P --env ENV (--revision N | --namespace NS -f FILE)", Short: "Deploy a project revision through the stage (raw manifests are recorded as a new revision first)", Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			req := controlplane.StageDeploy{Environment: env, Namespace: ns, Revision: revision, Message: message, OverrideCompatibility: override}
			if file != "" {
				objs, err := manifest.Load(file, os.Stdin)
				if err != nil {
					return err
				}
				for _, o := range objs {
					j, err := o.MarshalJSON()
					if err != nil {
						return err
					}
					req.Manifests = append(req.Manifests, j)
				}
			}
			var r controlplane.DeployAnswer
			if err := call("POST", base()+"/projects/"+project+"/stages/"+args[0]+"/deploy", req, &r); err != nil {
				return err
			}
			fmt.Fprintf(out, "command %s queued for %s: revision %d\n", r.ID, env, r.Revision)
			if p := r.Preview; p != nil {
				if p.EnvironmentChanged {
					fmt.Fprintf(out, "previewed as %s, but the environment changed since: the preview may no longer hold\n", p.ID)
				} else {
					fmt.Fprintf(out, "previewed as %s; the environment has not changed since\n", p.ID)
				}
			}
			return nil
		},
	}
	projectFlag(deploy)
	deploy.Flags().StringVar(&env, "env", "", "the environment")
	deploy.Flags().Int64Var(&revision, "revision", 0, "the project revision to deploy")
	deploy.Flags().StringVar(&ns, "namespace", "", "with -f: the namespace target of the manifests")
	deploy.Flags().StringVarP(&file, "filename", "f", "", "manifests to record as a new revision and deploy: a file or folder, - for stdin")
	deploy.Flags().StringVar(&message, "message", "", "with -f: the new revision's message")
	deploy.Flags().BoolVar(&override, "override-compatibility", false, "deploy where the environment's compatibility is unknown (a project manager or tenant admin)")
	rollout := &cobra.Command{
		Use: "rollout NAME --tenant T --project P --env ENV --image IMAGE", Short: "Roll out a proxy image through the stage", Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			var r map[string]string
			if err := call("POST", base()+"/projects/"+project+"/stages/"+args[0]+"/rollout", controlplane.StageRollout{Environment: env, Image: image}, &r); err != nil {
				return err
			}
			fmt.Fprintf(out, "command %s queued for %s\n", r["id"], env)
			return nil
		},
	}
	projectFlag(rollout)
	rollout.Flags().StringVar(&env, "env", "", "the environment")
	rollout.Flags().StringVar(&image, "image", "", "the proxy image")
	uninstall := &cobra.Command{
		Use: "uninstall NAME --tenant T --project P --env ENV --proxy NS/NAME", Short: "Delete one Manager-owned NexoProxy through the stage", Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			pns, pname, ok := strings.Cut(proxy, "/")
			if !ok {
				return fmt.Errorf("--proxy must be namespace/name, got %q", proxy)
			}
			var r map[string]string
			if err := call("POST", base()+"/projects/"+project+"/stages/"+args[0]+"/uninstall", controlplane.StageUninstall{Environment: env, Namespace: pns, Name: pname}, &r); err != nil {
				return err
			}
			fmt.Fprintf(out, "command %s queued for %s\n", r["id"], env)
			return nil
		},
	}
	projectFlag(uninstall)
	uninstall.Flags().StringVar(&env, "env", "", "the environment")
	uninstall.Flags().StringVar(&proxy, "proxy", "", "namespace/name")
	stage.AddCommand(set, targetsCmd, deploy, rollout, uninstall)
	stage.AddCommand(stageChangeCmds(out, call)...)
	return []*cobra.Command{tenantCmd, principal, projectCmd, stage, revisionCmd(out, call), promotionCmd(out, call), previewCmd(out, call)}
}

// envTenancyCmds are env label and env target, added to env.
func envTenancyCmds(out io.Writer, call caller) []*cobra.Command {
	var tenant string
	label := &cobra.Command{
		Use: "label ENV k=v... --tenant T", Short: "Set an environment's labels (a tenant admin; replaces them all)", Args: cobra.MinimumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			labels, err := pairs(args[1:])
			if err != nil {
				return err
			}
			if err := call("PUT", "/admin/tenants/"+tenant+"/environments/"+args[0]+"/labels", map[string]any{"labels": labels}, nil); err != nil {
				return err
			}
			fmt.Fprintf(out, "environment %s labelled %s\n", args[0], targeting.Selector(labels))
			return nil
		},
	}
	target := &cobra.Command{
		Use: "target ENV NAMESPACE k=v... --tenant T", Short: "Add or relabel a namespace target of an environment (a tenant admin)", Args: cobra.MinimumNArgs(2),
		RunE: func(_ *cobra.Command, args []string) error {
			labels, err := pairs(args[2:])
			if err != nil {
				return err
			}
			if err := call("PUT", "/admin/tenants/"+tenant+"/environments/"+args[0]+"/namespace-targets/"+args[1], map[string]any{"labels": labels}, nil); err != nil {
				return err
			}
			fmt.Fprintf(out, "namespace target %s/%s labelled %s\n", args[0], args[1], targeting.Selector(labels))
			return nil
		},
	}
	for _, c := range []*cobra.Command{label, target} {
		c.Flags().StringVar(&tenant, "tenant", "", "the tenant")
		_ = c.MarkFlagRequired("tenant")
	}
	return []*cobra.Command{label, target}
}

func orTenant(project string) string {
	if project == "" {
		return "the tenant"
	}
	return "project " + project
}
