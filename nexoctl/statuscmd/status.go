// Package statuscmd is `nexoctl status`: NexoProxies across namespaces under a header with the
// operator's and the Manager's health, or one proxy in detail.
package statuscmd

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/contract/scheme"
	"github.com/nexo-io/nexo-edge/contract/wire"
	"github.com/nexo-io/nexo-edge/controllers/render"
	"github.com/nexo-io/nexo-edge/nexoctl/cliopts"
	"github.com/nexo-io/nexo-edge/nexoctl/progress"
	"github.com/nexo-io/nexo-edge/preflight"
)

// Component is the health of the operator or the Manager.
type Component struct {
	Name      string `json:"name"`
	Found     bool   `json:"found"`
	Version   string `json:"version,omitempty"`
	Available bool   `json:"available"`
	Ready     string `json:"ready,omitempty"`
	Leader    string `json:"leader,omitempty"`
	// LastHeartbeat is when the Manager last reached the Control Plane (when it reports it).
	LastHeartbeat *metav1.Time `json:"lastHeartbeat,omitempty"`
	// Limits are the cluster's own limit the Manager enforces, as it reports it (nil when it
	// reports none): where it may deploy, which image repositories a rollout may name.
	Limits *Limits `json:"limits,omitempty"`
}

// Limits are the Manager's reported deploy limit (docs/security.md, "The cluster's own limit").
type Limits struct {
	Namespaces        []string `json:"namespaces"`
	ImageRepositories []string `json:"imageRepositories"`
}

// Proxy is one row.
type Proxy struct {
	Namespace     string `json:"namespace"`
	Name          string `json:"name"`
	Phase         string `json:"phase"`
	Ready         bool   `json:"ready"`
	ReadyReplicas int32  `json:"readyReplicas"`
	Replicas      int32  `json:"replicas"`
	GraphRevision string `json:"graphRevision,omitempty"`
	// AvailableRevision is the revision every replica runs; PreviousRevision the one before it
	// (its config is kept).
	AvailableRevision string      `json:"availableRevision,omitempty"`
	PreviousRevision  string      `json:"previousRevision,omitempty"`
	Created           metav1.Time `json:"created"`
	Message           string      `json:"message,omitempty"`
	// Final: waiting cannot make it Ready, it needs a change (phase Failed, or a rollout past its
	// progress deadline), as the operator decided for its current generation.
	Final      bool               `json:"final,omitempty"`
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	Graph      []GraphNode        `json:"graph,omitempty"`
	Objects    []string           `json:"objects,omitempty"`
}

// GraphNode is one object of a proxy's graph, with its readiness.
type GraphNode struct {
	Depth  int    `json:"depth"`
	Role   string `json:"role"`
	Kind   string `json:"kind"`
	Name   string `json:"name"`
	Ready  string `json:"ready"` // True, False, Unknown, Missing
	Reason string `json:"reason,omitempty"`
}

// Status is what `nexoctl status -o json` prints.
type Status struct {
	Operator Component `json:"operator"`
	Manager  Component `json:"manager"`
	Proxies  []Proxy   `json:"proxies"`
	// Scope says where the proxies were looked for ("namespace shop", "all namespaces").
	Scope string `json:"scope"`
	// AllReady is true only when at least one proxy was found and every one is Ready: an empty
	// selection is never a success (a false green for status --wait in CI).
	AllReady bool `json:"allReady"`
}

// NewCmd builds the command.
func NewCmd(o *cliopts.Options) *cobra.Command {
	var watch, waitReady bool
	var timeout time.Duration
	var selector string
	cmd := &cobra.Command{
		Use:   "status [NAME]",
		Short: "Show NexoProxies and the health of the operator and the Manager",
		Long: `Without NAME: a table of NexoProxies (namespace, name, phase, ready/desired replicas, graph
revision, age, message) under a header with the operator's and the Manager's health. With NAME:
that proxy's conditions, its resolved graph as a tree with each node's readiness, and the objects
generated for it. Exits 1 when a listed proxy is not Ready (with --wait: not Ready in time, or at
once when one is Failed or its rollout stalled, which waiting cannot change).`,
		Example: `  nexoctl status -A
  nexoctl status orders-proxy -n shop
  nexoctl status -A --wait --timeout 5m`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			objects := objectFormat(o.Output)
			if !objects && o.Output != OutputWide {
				if err := o.ValidateOutput(); err != nil {
					return cliopts.Fail(cliopts.ExitCannot, "unknown output format %q: use text, wide, json, yaml, name, jsonpath=…, go-template=… or custom-columns=…", o.Output)
				}
			}
			if objects && (watch || waitReady) {
				return cliopts.Fail(cliopts.ExitCannot, "-o %s prints the objects once: it does not go with --watch or --wait (use -o json or the table)", o.Output)
			}
			sel, err := labels.Parse(selector)
			if err != nil {
				return cliopts.Fail(cliopts.ExitCannot, "bad -l selector: %v", err)
			}
			cfg, err := o.RESTConfig()
			if err != nil {
				return err
			}
			env, err := preflight.NewClusterEnv(cfg, cliopts.DefaultNS)
			if err != nil {
				return cliopts.Fail(cliopts.ExitCannot, "%v", err)
			}
			name := ""
			if len(args) == 1 {
				name = args[0]
			}
			ctx := cmd.Context()
			if objects {
				return printObjects(ctx, env.Client, o, name, sel)
			}
			deadline := time.Now().Add(timeout)
			var seen map[string]Proxy // --watch: what was printed last, by namespace/name
			var changes <-chan struct{}
			if watch || waitReady {
				watchCtx, stop := context.WithCancel(ctx)
				defer stop() // the watch ends with the command
				changes = proxyChanges(watchCtx, cfg, o, name, sel)
			}
			// --wait shows each proxy while it waits (on the error stream: the answer stays the
			// table or document on the output).
			var waiting *progress.Display
			defer func() {
				if waiting != nil {
					waiting.Stop()
				}
			}()
			for {
				st, err := collect(ctx, env.Client, o, name, sel)
				if err != nil {
					return err
				}
				final := finalProxies(st)
				if waitReady && !watch && len(st.Proxies) > 0 {
					if waiting == nil {
						waiting = progress.Start(o.Err, progress.Options{
							Terminal: o.Output == cliopts.OutputText && o.ErrIsTerminal(),
							Quiet:    o.Output != cliopts.OutputText && o.Output != OutputWide,
							Title:    fmt.Sprintf("Waiting for %d NexoProxies in %s to be Ready (up to %s)", len(st.Proxies), st.Scope, timeout),
						})
					}
					waiting.Set(proxyItems(st))
				}
				if (!waitReady || st.AllReady || time.Now().After(deadline) || len(final) > 0) && !watch {
					if waiting != nil {
						waiting.Stop()
						waiting = nil
					}
					if err := print(o, st, name); err != nil {
						return err
					}
					if len(st.Proxies) == 0 {
						return cliopts.Fail(cliopts.ExitFailed, "no NexoProxies in %s: nothing is Ready (choose the namespace with -n, or -A for all)", st.Scope)
					}
					if waitReady && len(final) > 0 {
						return cliopts.Fail(cliopts.ExitFailed, "waiting cannot make %s Ready: it needs a change (%s); nexoctl status NAME -n NAMESPACE shows its conditions",
							strings.Join(final, ", "), "phase Failed, or its rollout stalled")
					}
					if !st.AllReady {
						return cliopts.Fail(cliopts.ExitFailed, "not all proxies are Ready")
					}
					return nil
				}
				if watch {
					if err := printChanges(o, st, name, &seen); err != nil {
						return err
					}
				}
				// Woken by a change of the proxies (a watch), else after headerRefresh: the
				// header's Deployments and status ConfigMap are read, not watched.
				wake := headerRefresh
				if waitReady && !watch {
					wake = min(wake, time.Until(deadline))
				}
				select {
				case <-ctx.Done():
					return nil
				case <-changes:
				case <-time.After(wake):
				}
			}
		},
	}
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "after the list, print each proxy whose state changes (like kubectl get -w) until interrupted")
	cmd.Flags().BoolVar(&waitReady, "wait", false, "wait until every listed proxy is Ready")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "how long --wait waits")
	cmd.Flags().StringVarP(&selector, "selector", "l", "", "label selector for NexoProxies")
	return cmd
}

// proxyItems are the listed proxies as --wait shows them: done when Ready, failed when waiting
// cannot make them Ready (Final), with their reason while they are not Ready.
func proxyItems(st Status) []progress.Item {
	var out []progress.Item
	for _, p := range st.Proxies {
		it := progress.Item{Name: p.Namespace + "/" + p.Name, State: fmt.Sprintf("%s %d/%d", dash(p.Phase), p.ReadyReplicas, p.Replicas),
			Done: p.Phase == string(nexov1alpha1.ProxyReady), Failed: p.Final}
		if !it.Done {
			it.Detail = truncate(p.Message, 100)
		}
		out = append(out, it)
	}
	return out
}

// finalProxies names the listed proxies that waiting cannot make Ready, with their reason.
func finalProxies(st Status) []string {
	var out []string
	for _, p := range st.Proxies {
		if p.Final {
			out = append(out, p.Namespace+"/"+p.Name+" ("+p.Message+")")
		}
	}
	return out
}

// collect reads the header (operator and Manager health) and the proxies; the header's two
// lookups run beside the list of proxies, each being a round trip.
func collect(ctx context.Context, c client.Client, o *cliopts.Options, name string, sel labels.Selector) (Status, error) {
	var operator, manager Component
	var header sync.WaitGroup
	header.Go(func() { operator = component(ctx, c, wire.OperatorName) })
	header.Go(func() { manager = component(ctx, c, wire.ManagerName) })
	st, err := collectProxies(ctx, c, o, name, sel)
	header.Wait()
	st.Operator, st.Manager = operator, manager
	return st, err
}

// listProxies lists the selected NexoProxies (all namespaces with -A, else the context's or
// -n's; with NAME, that one), sorted by namespace and name, and says what was selected.
func listProxies(ctx context.Context, c client.Client, o *cliopts.Options, name string, sel labels.Selector) (*nexov1alpha1.NexoProxyList, string, error) {
	list := &nexov1alpha1.NexoProxyList{}
	opts := []client.ListOption{client.MatchingLabelsSelector{Selector: sel}}
	ns, err := o.ContextNamespace()
	if err != nil {
		return list, "", err
	}
	scope := "all namespaces"
	if !o.AllNamespaces || name != "" {
		opts = append(opts, client.InNamespace(ns))
		scope = "namespace " + ns
	}
	if !sel.Empty() {
		scope += " matching " + sel.String()
	}
	if err := c.List(ctx, list, opts...); err != nil {
		return list, scope, cliopts.Fail(cliopts.ExitCannot, "list NexoProxies: %v (are the CRDs installed? run nexoctl preflight)", err)
	}
	sort.Slice(list.Items, func(i, j int) bool {
		a, b := list.Items[i], list.Items[j]
		return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
	})
	if name != "" {
		list.Items = slices.DeleteFunc(list.Items, func(p nexov1alpha1.NexoProxy) bool { return p.Name != name })
	}
	list.SetGroupVersionKind(proxyListKind)
	for i := range list.Items {
		list.Items[i].SetGroupVersionKind(nexov1alpha1.GroupVersion.WithKind("NexoProxy"))
	}
	return list, scope, nil
}

func collectProxies(ctx context.Context, c client.Client, o *cliopts.Options, name string, sel labels.Selector) (Status, error) {
	st := Status{AllReady: true}
	list, scope, err := listProxies(ctx, c, o, name, sel)
	st.Scope = scope
	if err != nil {
		return st, err
	}
	ns, _ := o.ContextNamespace()
	for i := range list.Items {
		p := &list.Items[i]
		row := Proxy{Namespace: p.Namespace, Name: p.Name, Phase: string(p.Status.Phase), ReadyReplicas: p.Status.ReadyReplicas,
			Replicas: p.Status.Replicas, GraphRevision: p.Status.GraphRevision, AvailableRevision: p.Status.AvailableRevision,
			PreviousRevision: p.Status.PreviousRevision, Created: p.CreationTimestamp}
		if row.Phase == "" {
			row.Phase = "Unknown"
		}
		if ok, c := nexov1alpha1.ReadyAndCurrent(p); c != nil {
			row.Ready = ok
			if !row.Ready {
				row.Message = c.Reason + ": " + c.Message
				row.Final = c.ObservedGeneration == p.Generation &&
					(p.Status.Phase == nexov1alpha1.ProxyFailed || c.Reason == nexov1alpha1.ReasonRolloutStalled)
			}
		} else {
			row.Message = "not reconciled yet (is the operator running and watching this namespace?)"
		}
		if name != "" {
			row.Conditions = p.Status.Conditions
			row.Graph = graph(ctx, c, p)
			row.Objects = generated(ctx, c, p, render.Children)
		}
		st.AllReady = st.AllReady && row.Ready
		st.Proxies = append(st.Proxies, row)
	}
	if name != "" && len(st.Proxies) == 0 {
		return st, cliopts.Fail(cliopts.ExitFailed, "NexoProxy %s not found in namespace %s", name, ns)
	}
	if len(st.Proxies) == 0 {
		st.AllReady = false
	}
	return st, nil
}

func component(ctx context.Context, c client.Client, name string) Component {
	comp := Component{Name: name}
	var list appsv1.DeploymentList
	if err := c.List(ctx, &list, client.MatchingLabels{"app.kubernetes.io/name": name}); err != nil || len(list.Items) == 0 {
		return comp
	}
	d := list.Items[0]
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	comp.Found, comp.Version = true, preflight.OperatorVersion(&d)
	comp.Available = d.Status.AvailableReplicas >= want
	comp.Ready = fmt.Sprintf("%d/%d", d.Status.ReadyReplicas, want)
	if name == wire.OperatorName {
		lease := &coordinationv1.Lease{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: d.Namespace, Name: wire.OperatorLeaderElectionID}, lease); err == nil && lease.Spec.HolderIdentity != nil {
			comp.Leader = *lease.Spec.HolderIdentity
		}
	} else {
		cm := &corev1.ConfigMap{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: d.Namespace, Name: wire.ManagerStatusConfigMap}, cm); err == nil {
			if t, err := time.Parse(time.RFC3339, cm.Data[wire.StatusLastHeartbeatTime]); err == nil {
				mt := metav1.NewTime(t)
				comp.LastHeartbeat = &mt
			}
			if ns, ok := cm.Data[wire.StatusDeployNamespaces]; ok {
				comp.Limits = &Limits{Namespaces: wire.SplitNamespaces(ns), ImageRepositories: wire.SplitNamespaces(cm.Data[wire.StatusImageRepositories])}
			}
		}
	}
	return comp
}

// graph resolves the proxy's references for display (NexoProxy.Graph, the walk the operator
// resolves), each with its readiness: True only when Ready for its current generation
// (ReadyAndCurrent, the operator's rule), Missing when it does not exist.
func graph(ctx context.Context, c client.Client, p *nexov1alpha1.NexoProxy) []GraphNode {
	ready, reason := readiness(p)
	nodes := []GraphNode{{Depth: 0, Role: "proxy", Kind: "NexoProxy", Name: p.Name, Ready: ready, Reason: reason}}
	pl := &nexov1alpha1.NexoPipeline{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: p.Spec.PipelineRef.Name}, pl); err != nil {
		pl = nil
	}
	for _, ref := range p.Graph(pl) {
		n := GraphNode{Depth: ref.Depth, Role: ref.Role, Kind: ref.Kind, Name: ref.Name, Ready: "Missing"}
		obj, err := c.Scheme().New(nexov1alpha1.GroupVersion.WithKind(ref.Kind))
		switch {
		case ref.Kind == "NexoPipeline" && pl != nil: // already read above
			n.Ready, n.Reason = readiness(pl)
		case err != nil:
			n.Ready = "Unknown"
		default:
			if o := obj.(nexov1alpha1.Object); c.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: ref.Name}, o) == nil {
				n.Ready, n.Reason = readiness(o)
			}
		}
		nodes = append(nodes, n)
	}
	return nodes
}

// readiness is an object's Ready column: True when Ready for its current generation, the
// condition's status and reason otherwise, Unknown with no condition or one not yet computed for
// the current generation.
func readiness(o nexov1alpha1.Object) (ready, reason string) {
	ok, c := nexov1alpha1.ReadyAndCurrent(o)
	switch {
	case ok:
		return "True", c.Reason
	case c == nil:
		return "Unknown", ""
	case c.ObservedGeneration != o.GetGeneration():
		return "Unknown", "NotObservedYet"
	}
	return string(c.Status), c.Reason
}

// generated lists the objects the operator made for the proxy (controller-owned by it), of
// every child kind the operator generates (render.Children), read as metadata only.
func generated(ctx context.Context, c client.Client, p *nexov1alpha1.NexoProxy, kinds []render.ChildKind) []string {
	var out []string
	for _, k := range kinds {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(k.GVK.GroupVersion().WithKind(k.Kind() + "List"))
		if err := c.List(ctx, list, client.InNamespace(p.Namespace), client.MatchingLabels{wire.ProxyLabel: p.Name}); err != nil {
			continue
		}
		for i := range list.Items {
			if metav1.IsControlledBy(&list.Items[i], p) {
				out = append(out, k.Kind()+"/"+list.Items[i].Name)
			}
		}
	}
	return out
}

func age(t metav1.Time) string {
	if t.IsZero() {
		return "-"
	}
	return duration.HumanDuration(time.Since(t.Time))
}

// printChanges is --watch: the first time the whole status, then only the proxies whose row
// changed (or that went away), one line or one document each, like kubectl get -w.
func printChanges(o *cliopts.Options, st Status, name string, seen *map[string]Proxy) error {
	if *seen == nil {
		*seen = map[string]Proxy{}
		for _, p := range st.Proxies {
			(*seen)[p.Namespace+"/"+p.Name] = p
		}
		return print(o, st, name)
	}
	var changed []Proxy
	now := map[string]bool{}
	for _, p := range st.Proxies {
		key := p.Namespace + "/" + p.Name
		now[key] = true
		if before, ok := (*seen)[key]; !ok || state(before) != state(p) {
			changed = append(changed, p)
		}
		(*seen)[key] = p
	}
	for key, p := range *seen {
		if !now[key] {
			p.Phase, p.Message = "Deleted", ""
			changed = append(changed, p)
			delete(*seen, key)
		}
	}
	sort.Slice(changed, func(i, j int) bool {
		return changed[i].Namespace+"/"+changed[i].Name < changed[j].Namespace+"/"+changed[j].Name
	})
	for _, p := range changed {
		if o.Output != cliopts.OutputText {
			if err := o.PrintData(p); err != nil {
				return err
			}
			continue
		}
		if err := printProxyTable(o.Out, []Proxy{p}, false, true, o.Color()); err != nil {
			return err
		}
	}
	return nil
}

// state is what --watch compares: the row without its age.
func state(p Proxy) string {
	return fmt.Sprintf("%s|%d/%d|%s|%s", p.Phase, p.ReadyReplicas, p.Replicas, p.GraphRevision, p.Message)
}

func print(o *cliopts.Options, st Status, name string) error {
	if o.Output != cliopts.OutputText && o.Output != OutputWide {
		return o.PrintData(st)
	}
	printHeader(o.Out, st)
	if name == "" {
		if len(st.Proxies) == 0 {
			fmt.Fprintf(o.Out, "(no NexoProxies in %s)\n", st.Scope)
			return nil
		}
		return printProxyTable(o.Out, st.Proxies, o.Output == OutputWide, false, o.Color())
	}
	p := st.Proxies[0]
	fmt.Fprintf(o.Out, "NexoProxy %s/%s: %s, %d/%d replicas ready, graph revision %s\n\nConditions:\n", p.Namespace, p.Name, p.Phase, p.ReadyReplicas, p.Replicas, dash(p.GraphRevision))
	if err := printConditions(o.Out, p.Conditions); err != nil {
		return err
	}
	fmt.Fprintln(o.Out, "\nGraph:")
	for i, n := range p.Graph {
		prefix := ""
		for d := 1; d < n.Depth; d++ { // a rule under every ancestor that has siblings below it
			if last(p.Graph, ancestor(p.Graph, i, d)) {
				prefix += "    "
			} else {
				prefix += "│   "
			}
		}
		if n.Depth > 0 {
			branch := "├── "
			if last(p.Graph, i) {
				branch = "└── "
			}
			prefix += branch
		}
		reason := ""
		if n.Reason != "" && n.Ready != "True" {
			reason = " (" + n.Reason + ")"
		}
		fmt.Fprintf(o.Out, "  %s%s %s %s/%s%s\n", prefix, glyph(n.Ready), n.Role, n.Kind, n.Name, reason)
	}
	fmt.Fprintln(o.Out, "\nGenerated objects:")
	if len(p.Objects) == 0 {
		fmt.Fprintln(o.Out, "  (none)")
	}
	for _, obj := range p.Objects {
		fmt.Fprintln(o.Out, "  "+obj)
	}
	return nil
}

// ancestor returns the index of graph[i]'s ancestor at depth d.
func ancestor(g []GraphNode, i, d int) int {
	for j := i - 1; j >= 0; j-- {
		if g[j].Depth == d {
			return j
		}
	}
	return 0
}

// last reports whether graph[i] is the last node of its depth under the same parent.
func last(g []GraphNode, i int) bool {
	for j := i + 1; j < len(g); j++ {
		if g[j].Depth < g[i].Depth {
			return true
		}
		if g[j].Depth == g[i].Depth {
			return false
		}
	}
	return true
}

func glyph(ready string) string {
	switch ready {
	case "True":
		return "✔"
	case "Missing":
		return "×"
	case "False":
		return "×"
	}
	return "…"
}

func printHeader(w io.Writer, st Status) {
	line := func(c Component) string {
		if !c.Found {
			return c.Name + ": not found"
		}
		s := fmt.Sprintf("%s %s: ", c.Name, c.Version)
		if c.Available {
			s += "available"
		} else {
			s += "NOT available"
		}
		s += " (" + c.Ready + " ready)"
		if c.Leader != "" {
			s += ", leader " + c.Leader
		}
		if c.LastHeartbeat != nil {
			s += ", last heartbeat " + age(*c.LastHeartbeat) + " ago"
		}
		if l := c.Limits; l != nil {
			s += "; deploys into " + listOrNone(l.Namespaces) + ", images from " + listOrNone(l.ImageRepositories)
		}
		return s
	}
	fmt.Fprintln(w, line(st.Operator))
	fmt.Fprintln(w, line(st.Manager))
	fmt.Fprintln(w)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}

// listOrNone is a limit's list, or "nowhere (the cluster's limit is empty)".
func listOrNone(l []string) string {
	if len(l) == 0 {
		return "nowhere (the cluster's limit is empty)"
	}
	return strings.Join(l, ",")
}

// phaseColour is the SGR colour of each phase in the table (on a terminal, without NO_COLOR):
// green Ready, yellow on the way, red needs attention.
var phaseColour = map[string]string{
	string(nexov1alpha1.ProxyReady): "32", string(nexov1alpha1.ProxyProgressing): "33", string(nexov1alpha1.ProxyPending): "33",
	string(nexov1alpha1.ProxyDegraded): "31", string(nexov1alpha1.ProxyFailed): "31",
}

// paint colours text with the SGR colour sgr ("": the terminal's default) when on.
func paint(text, sgr string, on bool) string {
	if !on {
		return text
	}
	if sgr == "" {
		sgr = "39"
	}
	return "\x1b[" + sgr + "m" + text + "\x1b[0m"
}

// headerRefresh is how often --watch and --wait read the state again without a change of the
// proxies (the operator's and the Manager's health in the header).
const headerRefresh = 30 * time.Second

// proxyChanges signals each change of the selected NexoProxies, from a watch that is opened again
// when the API server ends it, until ctx ends. Changes in a burst give one signal.
func proxyChanges(ctx context.Context, cfg *rest.Config, o *cliopts.Options, name string, sel labels.Selector) <-chan struct{} {
	out := make(chan struct{}, 1)
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return out // no watch: headerRefresh alone
	}
	opts := []client.ListOption{client.MatchingLabelsSelector{Selector: sel}}
	if ns, err := o.ContextNamespace(); err == nil && (!o.AllNamespaces || name != "") {
		opts = append(opts, client.InNamespace(ns))
	}
	if name != "" {
		opts = append(opts, client.MatchingFields{"metadata.name": name})
	}
	go func() {
		for ctx.Err() == nil {
			w, err := c.Watch(ctx, &nexov1alpha1.NexoProxyList{}, opts...)
			if err != nil {
				select {
				case <-ctx.Done():
				case <-time.After(2 * time.Second):
				}
				continue
			}
			for range w.ResultChan() {
				select {
				case out <- struct{}{}:
				default:
				}
			}
			w.Stop()
		}
	}()
	return out
}
