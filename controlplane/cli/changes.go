package cli

// The change-management commands (docs/controlplane.md, "Change management"): revision
// create/list/show/diff, stage preview/status/rollback/promote/freeze/thaw, preview show,
// promotion list/show/approve, env freeze/thaw/health.

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/nexo-io/nexo-edge/contract/manifest"
	"github.com/nexo-io/nexo-edge/controlplane"
	"github.com/nexo-io/nexo-edge/controlplane/storage"
)

// projectScope holds the --tenant and --project flags of one command.
type projectScope struct{ tenant, project string }

func (p *projectScope) flags(c *cobra.Command, withProject bool) {
	c.Flags().StringVar(&p.tenant, "tenant", "", "the tenant")
	_ = c.MarkFlagRequired("tenant")
	if withProject {
		c.Flags().StringVar(&p.project, "project", "", "the project")
		_ = c.MarkFlagRequired("project")
	}
}

func (p *projectScope) base() string { return "/admin/tenants/" + p.tenant + "/projects/" + p.project }

func revisionCmd(out io.Writer, call caller) *cobra.Command {
	cmd := &cobra.Command{Use: "revision", Short: "A project's revisions: numbered, immutable sets of nexo.io manifests"}
	var file, message string
	var asJSON bool
	create := &cobra.Command{
		Use: "create --tenant T --project P -f FILE [--message M]", Short: "Record the project's next revision (an editor or above)", Args: cobra.NoArgs,
	}
	var cs projectScope
	create.RunE = func(_ *cobra.Command, _ []string) error {
		objs, err := manifest.Load(file, os.Stdin)
		if err != nil {
			return err
		}
		req := controlplane.NewRevision{Message: message}
		for _, o := range objs {
			j, err := o.MarshalJSON()
			if err != nil {
				return err
			}
			req.Manifests = append(req.Manifests, j)
		}
		var rev controlplane.RevisionView
		if err := call("POST", cs.base()+"/revisions", req, &rev); err != nil {
			return err
		}
		fmt.Fprintf(out, "revision %d of project %s/%s: %d objects, %s\n", rev.Number, cs.tenant, cs.project, len(req.Manifests), rev.Digest)
		return nil
	}
	cs.flags(create, true)
	create.Flags().StringVarP(&file, "filename", "f", "", "manifests: a file or folder, - for stdin")
	create.Flags().StringVar(&message, "message", "", "what the revision changes")
	_ = create.MarkFlagRequired("filename")

	var ls projectScope
	list := &cobra.Command{Use: "list --tenant T --project P", Short: "The project's revisions, newest first", Args: cobra.NoArgs}
	list.RunE = func(_ *cobra.Command, _ []string) error {
		var res struct{ Revisions []storage.Revision }
		if err := call("GET", ls.base()+"/revisions", nil, &res); err != nil {
			return err
		}
		if asJSON {
			return printJSON(out, res.Revisions)
		}
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "REVISION\tCREATED\tAUTHOR\tDIGEST\tMESSAGE")
		for _, r := range res.Revisions {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", r.Number, r.Created.UTC().Format(time.RFC3339), r.Author, shortDigest(r.Digest), r.Message)
		}
		return tw.Flush()
	}
	ls.flags(list, true)
	list.Flags().BoolVar(&asJSON, "json", false, "print JSON")

	var ss projectScope
	show := &cobra.Command{Use: "show N --tenant T --project P", Short: "One revision with its manifests (JSON)", Args: cobra.ExactArgs(1)}
	show.RunE = func(_ *cobra.Command, args []string) error {
		var rev controlplane.RevisionView
		if err := call("GET", ss.base()+"/revisions/"+args[0], nil, &rev); err != nil {
			return err
		}
		return printJSON(out, rev)
	}
	ss.flags(show, true)

	var ds projectScope
	diff := &cobra.Command{Use: "diff FROM TO --tenant T --project P", Short: "What going from revision FROM to TO changes, per object and per field", Args: cobra.ExactArgs(2)}
	diff.RunE = func(_ *cobra.Command, args []string) error {
		var d controlplane.RevisionDiff
		if err := call("GET", ds.base()+"/revisions/"+args[1]+"/diff?from="+args[0], nil, &d); err != nil {
			return err
		}
		if asJSON {
			return printJSON(out, d)
		}
		fmt.Fprintf(out, "revision %d → %d: %d objects differ, %d unchanged\n", d.From, d.To, len(d.Objects), d.Unchanged)
		for _, o := range d.Objects {
			fmt.Fprintf(out, "%s %s %s/%s\n", o.Change, o.Kind, o.Namespace, o.Name)
			for _, f := range o.Fields {
				fmt.Fprintf(out, "    %s %s%s\n", f.Operation, f.Path, valueSuffix(f.Value))
			}
		}
		return nil
	}
	ds.flags(diff, true)
	diff.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.AddCommand(create, list, show, diff)
	return cmd
}

func valueSuffix(v any) string {
	if v == nil {
		return ""
	}
	b, _ := json.Marshal(v)
	return " = " + truncateText(string(b), 120)
}

func truncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func shortDigest(d string) string { return truncateText(d, 19) }

func printJSON(out io.Writer, v any) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// stageChangeCmds are stage preview, status, rollback, promote, freeze and thaw.
func stageChangeCmds(out io.Writer, call caller) []*cobra.Command {
	var env, reason, until string
	var revision, to int64
	var override, wait bool
	var timeout time.Duration

	var ps projectScope
	preview := &cobra.Command{Use: "preview NAME --tenant T --project P --env ENV --revision N [--wait]", Short: "Ask the environment what deploying the revision through the stage would do (changes nothing)", Args: cobra.ExactArgs(1)}
	preview.RunE = func(_ *cobra.Command, args []string) error {
		var r struct{ ID string }
		if err := call("POST", ps.base()+"/stages/"+args[0]+"/preview", controlplane.StagePreview{Environment: env, Revision: revision, OverrideCompatibility: override}, &r); err != nil {
			return err
		}
		fmt.Fprintf(out, "preview %s queued for %s: revision %d\n", r.ID, env, revision)
		if !wait {
			return nil
		}
		view, err := waitPreview(call, ps.base(), r.ID, timeout)
		if err != nil {
			return err
		}
		return printPreview(out, view)
	}
	ps.flags(preview, true)
	preview.Flags().StringVar(&env, "env", "", "the environment")
	preview.Flags().Int64Var(&revision, "revision", 0, "the project revision")
	preview.Flags().BoolVar(&override, "override-compatibility", false, "preview where the environment's compatibility is unknown (a project manager or tenant admin)")
	preview.Flags().BoolVar(&wait, "wait", false, "wait for the Manager's answer and print it")
	preview.Flags().DurationVar(&timeout, "timeout", 2*time.Minute, "with --wait: how long to wait")

	var sts projectScope
	status := &cobra.Command{Use: "status NAME --tenant T --project P", Short: "Per environment: the revision the stage deployed there and how it runs (Pending, Progressing, Synced, Degraded, Failed)", Args: cobra.ExactArgs(1)}
	status.RunE = func(_ *cobra.Command, args []string) error {
		var res struct {
			Environments []controlplane.StageRun
		}
		if err := call("GET", sts.base()+"/stages/"+args[0]+"/status", nil, &res); err != nil {
			return err
		}
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ENVIRONMENT\tDESIRED\tRUNNING\tVIA\tSTATE\tSYNCED SINCE\tPROXIES")
		for _, r := range res.Environments {
			since := "-"
			if r.SyncedSince != nil {
				since = r.SyncedSince.UTC().Format(time.RFC3339)
			}
			var proxies []string
			for _, p := range r.Proxies {
				proxies = append(proxies, fmt.Sprintf("%s/%s %s→%s %s", p.Namespace, p.Name, orDash(p.GraphRevision), orDash(p.Predicted), orDash(p.Phase)))
			}
			running := "-"
			if r.Running > 0 {
				running = strconv.FormatInt(r.Running, 10)
			}
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%s\n", r.Environment, r.Revision, running, r.Via, r.State, since, orDash(strings.Join(proxies, ", ")))
		}
		return tw.Flush()
	}
	sts.flags(status, true)

	var rs projectScope
	rollback := &cobra.Command{Use: "rollback NAME --tenant T --project P --env ENV --to N", Short: "Deploy revision N, which ran in the environment before, again (a new, higher signature revision)", Args: cobra.ExactArgs(1)}
	rollback.RunE = func(_ *cobra.Command, args []string) error {
		var r controlplane.DeployAnswer
		if err := call("POST", rs.base()+"/stages/"+args[0]+"/rollback", controlplane.StageRollback{Environment: env, To: to, OverrideCompatibility: override}, &r); err != nil {
			return err
		}
		fmt.Fprintf(out, "command %s queued for %s: back to revision %d\n", r.ID, env, r.Revision)
		return nil
	}
	rs.flags(rollback, true)
	rollback.Flags().StringVar(&env, "env", "", "the environment")
	rollback.Flags().Int64Var(&to, "to", 0, "the revision to return to")
	rollback.Flags().BoolVar(&override, "override-compatibility", false, "where the environment's compatibility is unknown (a project manager or tenant admin)")

	var prs projectScope
	promote := &cobra.Command{Use: "promote NAME --tenant T --project P --revision N [--message M]", Short: "Promote a revision into the stage from the stage it promotes from", Args: cobra.ExactArgs(1)}
	var message string
	promote.RunE = func(_ *cobra.Command, args []string) error {
		var rec storage.PromotionRecord
		if err := call("POST", prs.base()+"/stages/"+args[0]+"/promote", controlplane.StagePromote{Revision: revision, Message: message}, &rec); err != nil {
			return err
		}
		printPromotion(out, rec)
		return nil
	}
	prs.flags(promote, true)
	promote.Flags().Int64Var(&revision, "revision", 0, "the project revision")
	promote.Flags().StringVar(&message, "message", "", "why")

	var fs projectScope
	freeze := &cobra.Command{Use: "freeze NAME --tenant T --project P --reason R [--until TIME]", Short: "Refuse deploys, rollbacks, promotions, rollouts and uninstalls through the stage until thawed", Args: cobra.ExactArgs(1)}
	freeze.RunE = func(_ *cobra.Command, args []string) error {
		req, err := freezeRequest(reason, until)
		if err != nil {
			return err
		}
		if err := call("PUT", fs.base()+"/stages/"+args[0]+"/freeze", req, nil); err != nil {
			return err
		}
		fmt.Fprintf(out, "stage %s/%s frozen: %s\n", fs.project, args[0], req.Reason)
		return nil
	}
	fs.flags(freeze, true)
	freeze.Flags().StringVar(&reason, "reason", "", "why (every refused change says it)")
	freeze.Flags().StringVar(&until, "until", "", "when the freeze ends by itself (RFC 3339); empty: until thawed")

	var ts projectScope
	thaw := &cobra.Command{Use: "thaw NAME --tenant T --project P", Short: "Lift a stage's freeze", Args: cobra.ExactArgs(1)}
	thaw.RunE = func(_ *cobra.Command, args []string) error {
		if err := call("DELETE", ts.base()+"/stages/"+args[0]+"/freeze", nil, nil); err != nil {
			return err
		}
		fmt.Fprintf(out, "stage %s/%s thawed\n", ts.project, args[0])
		return nil
	}
	ts.flags(thaw, true)
	return []*cobra.Command{preview, status, rollback, promote, freeze, thaw}
}

func freezeRequest(reason, until string) (controlplane.FreezeRequest, error) {
	req := controlplane.FreezeRequest{Reason: reason}
	if until != "" {
		t, err := time.Parse(time.RFC3339, until)
		if err != nil {
			return req, fmt.Errorf("--until %q: an RFC 3339 time, such as 2026-12-31T18:00:00Z", until)
		}
		req.Until = &t
	}
	return req, nil
}

// waitPreview polls a preview until its Manager answered (or failed), up to timeout.
func waitPreview(call caller, base, id string, timeout time.Duration) (controlplane.PreviewView, error) {
	deadline := time.Now().Add(timeout)
	for {
		var v controlplane.PreviewView
		if err := call("GET", base+"/previews/"+id, nil, &v); err != nil {
			return v, err
		}
		if !v.Command.Open() {
			return v, nil
		}
		if time.Now().After(deadline) {
			return v, fmt.Errorf("preview %s is still %s after %s: the environment's Manager has not answered (is it connected? controlplane env health)", id, v.Command, timeout)
		}
		time.Sleep(time.Second)
	}
}

// printPreview prints what a preview found: each object's outcome and changed fields, each
// proxy's graph revision before → after and whether its pods roll.
func printPreview(out io.Writer, v controlplane.PreviewView) error {
	if v.Command != storage.CommandApplied || v.Result == nil {
		return fmt.Errorf("preview %s %s: %s", v.ID, v.Command, v.CommandMessage)
	}
	r := v.Result
	s := r.Summary
	fmt.Fprintf(out, "revision %d in %s: %d created, %d changed, %d unchanged, %d refused; %d proxies roll, %d refused\n",
		v.Revision, v.Environment, s.Created, s.Changed, s.Unchanged, s.Refused, s.Rolls, s.ProxiesRefused)
	if v.EnvironmentChanged {
		fmt.Fprintln(out, "the environment changed since this preview: it may no longer hold")
	}
	if r.Truncated != "" {
		fmt.Fprintln(out, r.Truncated)
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "OBJECT\tOUTCOME\tDETAIL")
	for _, o := range r.Objects {
		detail := o.Reason
		if len(o.Changes) > 0 {
			var paths []string
			for _, c := range o.Changes {
				paths = append(paths, c.Op+" "+c.Path)
			}
			detail = strings.Join(paths, ", ")
		}
		fmt.Fprintf(tw, "%s %s/%s\t%s\t%s\n", o.Kind, o.Namespace, o.Name, o.Outcome, orDash(detail))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	tw = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PROXY\tBEFORE\tAFTER\tOUTCOME\tWHY")
	for _, p := range r.Proxies {
		fmt.Fprintf(tw, "%s/%s\t%s\t%s\t%s\t%s\n", p.Namespace, p.Name, orDash(p.Before), orDash(p.After), p.Outcome, orDash(p.Why))
	}
	return tw.Flush()
}

func previewCmd(out io.Writer, call caller) *cobra.Command {
	cmd := &cobra.Command{Use: "preview", Short: "Previews: what a revision would do in an environment"}
	var ss projectScope
	var asJSON bool
	show := &cobra.Command{Use: "show ID --tenant T --project P", Short: "A preview and, once answered, what it found", Args: cobra.ExactArgs(1)}
	show.RunE = func(_ *cobra.Command, args []string) error {
		var v controlplane.PreviewView
		if err := call("GET", ss.base()+"/previews/"+args[0], nil, &v); err != nil {
			return err
		}
		if asJSON {
			return printJSON(out, v)
		}
		if v.Command.Open() {
			fmt.Fprintf(out, "preview %s of revision %d in %s: %s, not answered yet\n", v.ID, v.Revision, v.Environment, v.Command)
			return nil
		}
		return printPreview(out, v)
	}
	ss.flags(show, true)
	show.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.AddCommand(show)
	return cmd
}

func printPromotion(out io.Writer, rec storage.PromotionRecord) {
	fmt.Fprintf(out, "promotion %s of revision %d from %s to %s by %s: %s\n", rec.ID, rec.Revision, rec.From, rec.To, rec.Promoter, rec.State)
	for _, a := range rec.Approvals {
		fmt.Fprintf(out, "  approved by %s at %s\n", a.Approver, a.At.UTC().Format(time.RFC3339))
	}
	for _, t := range rec.Targets {
		fmt.Fprintf(out, "  %s: command %s %s\n", t.Environment, t.CommandID, t.Command)
	}
}

func promotionCmd(out io.Writer, call caller) *cobra.Command {
	cmd := &cobra.Command{Use: "promotion", Short: "Promotions of a project's revisions between stages"}
	var ls, ss, as projectScope
	var asJSON bool
	list := &cobra.Command{Use: "list --tenant T --project P", Short: "The project's promotions, newest first", Args: cobra.NoArgs}
	list.RunE = func(_ *cobra.Command, _ []string) error {
		var res struct{ Promotions []storage.PromotionRecord }
		if err := call("GET", ls.base()+"/promotions", nil, &res); err != nil {
			return err
		}
		if asJSON {
			return printJSON(out, res.Promotions)
		}
		for _, p := range res.Promotions {
			printPromotion(out, p)
		}
		return nil
	}
	ls.flags(list, true)
	list.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	show := &cobra.Command{Use: "show ID --tenant T --project P", Short: "One promotion: who, what, approvals and the outcome per environment", Args: cobra.ExactArgs(1)}
	show.RunE = func(_ *cobra.Command, args []string) error {
		var rec storage.PromotionRecord
		if err := call("GET", ss.base()+"/promotions/"+args[0], nil, &rec); err != nil {
			return err
		}
		printPromotion(out, rec)
		return nil
	}
	ss.flags(show, true)
	approve := &cobra.Command{Use: "approve ID --tenant T --project P", Short: "Approve another principal's promotion (a project manager or tenant admin)", Args: cobra.ExactArgs(1)}
	approve.RunE = func(_ *cobra.Command, args []string) error {
		var rec storage.PromotionRecord
		if err := call("POST", as.base()+"/promotions/"+args[0]+"/approve", nil, &rec); err != nil {
			return err
		}
		printPromotion(out, rec)
		return nil
	}
	as.flags(approve, true)
	cmd.AddCommand(list, show, approve)
	return cmd
}

// envChangeCmds are env freeze, thaw and health, added to env.
func envChangeCmds(out io.Writer, call caller) []*cobra.Command {
	var fs, ts, hs projectScope
	var reason, until string
	var asJSON bool
	freeze := &cobra.Command{Use: "freeze ENV --tenant T --reason R [--until TIME]", Short: "Refuse change to the environment through every stage until thawed (a tenant admin)", Args: cobra.ExactArgs(1)}
	freeze.RunE = func(_ *cobra.Command, args []string) error {
		req, err := freezeRequest(reason, until)
		if err != nil {
			return err
		}
		if err := call("PUT", "/admin/tenants/"+fs.tenant+"/environments/"+args[0]+"/freeze", req, nil); err != nil {
			return err
		}
		fmt.Fprintf(out, "environment %s frozen: %s\n", args[0], req.Reason)
		return nil
	}
	fs.flags(freeze, false)
	freeze.Flags().StringVar(&reason, "reason", "", "why (every refused change says it)")
	freeze.Flags().StringVar(&until, "until", "", "when the freeze ends by itself (RFC 3339); empty: until thawed")
	thaw := &cobra.Command{Use: "thaw ENV --tenant T", Short: "Lift an environment's freeze", Args: cobra.ExactArgs(1)}
	thaw.RunE = func(_ *cobra.Command, args []string) error {
		if err := call("DELETE", "/admin/tenants/"+ts.tenant+"/environments/"+args[0]+"/freeze", nil, nil); err != nil {
			return err
		}
		fmt.Fprintf(out, "environment %s thawed\n", args[0])
		return nil
	}
	ts.flags(thaw, false)
	health := &cobra.Command{Use: "health ENV --tenant T", Short: "An environment's state, heartbeat age, bundle, limits and freeze (every role of its tenant)", Args: cobra.ExactArgs(1)}
	health.RunE = func(_ *cobra.Command, args []string) error {
		var h controlplane.EnvironmentHealth
		if err := call("GET", "/admin/tenants/"+hs.tenant+"/environments/"+args[0]+"/health", nil, &h); err != nil {
			return err
		}
		if asJSON {
			return printJSON(out, h)
		}
		age := "-"
		if h.AgeSeconds != nil {
			age = strconv.FormatInt(*h.AgeSeconds, 10) + "s"
		}
		fmt.Fprintf(out, "environment %s (%s): %s, last heartbeat %s ago; Manager %s, bundle %s installed by %s; promotion contract %v\n",
			h.ID, h.Name, h.State, age, orDash(h.ManagerVersion), orDash(h.BundleVersion), orDash(h.InstalledBy), h.PromotionContract)
		if h.Limits != nil {
			fmt.Fprintf(out, "limits: namespaces %s; image repositories %s\n", orDash(strings.Join(h.Limits.Namespaces, ", ")), orDash(strings.Join(h.Limits.ImageRepositories, ", ")))
		}
		for _, f := range h.Freezes {
			fmt.Fprintf(out, "frozen by %s since %s: %s\n", f.By, f.Created.UTC().Format(time.RFC3339), f.Reason)
		}
		return nil
	}
	hs.flags(health, false)
	health.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return []*cobra.Command{freeze, thaw, health}
}
