// Package preview says what applying a set of nexo.io objects would do in a cluster, without
// writing anything (docs/controlplane.md, "Previews"): every object goes through a server-side
// dry-run apply (admission, the CRD's schema and CEL rules, the cluster's deploy limit), and
// every NexoProxy whose graph the objects touch is resolved as the operator resolves it
// (NexoProxy.Graph) twice, from the cluster and from the cluster with the dry-run results in
// place, and rendered with the operator's renderer (controllers/render). No Secret is read: a
// deploy carries no Secret, so both renderings hold Secret content equal and compare what the
// objects change. The Manager answers a preview command with it and checks a deploy with it;
// nexoctl diff runs it with the caller's credentials.
package preview

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	"gomodules.xyz/jsonpatch/v2"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/catalog"
	"github.com/nexo-io/nexo-edge/contract/protocol"
	"github.com/nexo-io/nexo-edge/contract/signature"
	"github.com/nexo-io/nexo-edge/controllers/render"
)

// Options are how a preview reaches the cluster.
type Options struct {
	// FieldManager is the field manager the dry-run applies as: the one the real apply uses,
	// so field ownership is decided as it would be.
	FieldManager string
	// OperatorNamespace holds the profiles' image-pull Secrets (their copies' names are part
	// of the pod template).
	OperatorNamespace string
	// Proxies lists the NexoProxies of a namespace that the objects may touch (the Manager:
	// its own; nexoctl: all it may list).
	Proxies func(ctx context.Context, namespace string) ([]nexov1alpha1.NexoProxy, error)
	// SkipDryRun previews objects that a dry-run already accepted (a deploy's own check): they
	// are taken as they are.
	SkipDryRun bool
}

// Run previews objs (ready to apply: namespaced, labelled, without managed fields) and returns
// the answer, bounded by protocol.MaxPreviewBytes. Only a failure to read the cluster is an
// error; what the API server or the operator would refuse is part of the answer.
func Run(ctx context.Context, c client.Client, objs []*unstructured.Unstructured, opts Options) (*protocol.PreviewResult, error) {
	res := &protocol.PreviewResult{}
	after := overlay{}
	touched := map[string]bool{}
	var namespaces []string
	for _, u := range objs {
		op, result, err := object(ctx, c, u, opts)
		if err != nil {
			return nil, err
		}
		res.Objects = append(res.Objects, op)
		touched[key(u.GetKind(), u.GetNamespace(), u.GetName())] = true
		if !slices.Contains(namespaces, u.GetNamespace()) {
			namespaces = append(namespaces, u.GetNamespace())
		}
		if result != nil {
			typed, err := typedObject(c.Scheme(), result)
			if err != nil {
				return nil, err
			}
			after[key(u.GetKind(), u.GetNamespace(), u.GetName())] = typed
		}
	}
	sort.Strings(namespaces)
	read := &reads{c: c, seen: map[string]nexov1alpha1.Object{}}
	for _, ns := range namespaces {
		proxies, err := candidates(ctx, ns, after, opts)
		if err != nil {
			return nil, err
		}
		for i := range proxies {
			p, err := proxyPreview(ctx, read, &proxies[i], after, touched, opts)
			if err != nil {
				return nil, err
			}
			if p != nil {
				res.Proxies = append(res.Proxies, *p)
			}
		}
	}
	summarize(res)
	bound(res, protocol.MaxPreviewBytes)
	return res, nil
}

func key(kind, namespace, name string) string { return kind + "/" + namespace + "/" + name }

// overlay holds the dry-run results: what the cluster would hold after the apply.
type overlay map[string]nexov1alpha1.Object

// object dry-runs one object and compares the result with the object in the cluster.
func object(ctx context.Context, c client.Client, u *unstructured.Unstructured, opts Options) (protocol.ObjectPreview, *unstructured.Unstructured, error) {
	op := protocol.ObjectPreview{Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName()}
	existing := &unstructured.Unstructured{}
	existing.SetGroupVersionKind(u.GroupVersionKind())
	err := c.Get(ctx, client.ObjectKeyFromObject(u), existing)
	switch {
	case apierrors.IsNotFound(err):
		existing = nil
	case err != nil:
		return op, nil, fmt.Errorf("read %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	result := u.DeepCopy()
	if !opts.SkipDryRun {
		if err := c.Patch(ctx, result, client.Apply, client.FieldOwner(opts.FieldManager), client.ForceOwnership, client.DryRunAll); err != nil {
			if apierrors.IsForbidden(err) || apierrors.IsInvalid(err) || apierrors.IsConflict(err) || apierrors.IsBadRequest(err) || apierrors.IsNotFound(err) {
				op.Outcome, op.Reason = protocol.ObjectRefused, truncate(err.Error(), 600)
				return op, nil, nil
			}
			return op, nil, fmt.Errorf("dry-run %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
		}
	}
	if existing == nil {
		op.Outcome = protocol.ObjectCreated
		return op, result, nil
	}
	changes, err := fieldChanges(existing, result)
	if err != nil {
		return op, nil, err
	}
	op.Outcome = protocol.ObjectUnchanged
	if len(changes) > 0 {
		op.Outcome, op.Changes = protocol.ObjectChanged, changes
	}
	return op, result, nil
}

// fieldChanges are the JSON Patch operations that turn before into after, leaving out what
// every apply changes (server-set metadata, status, and the signature annotations each deploy
// renews).
func fieldChanges(before, after *unstructured.Unstructured) ([]protocol.FieldChange, error) {
	a, err := json.Marshal(comparable(before))
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(comparable(after))
	if err != nil {
		return nil, err
	}
	ops, err := jsonpatch.CreatePatch(a, b)
	if err != nil {
		return nil, err
	}
	out := make([]protocol.FieldChange, 0, len(ops))
	for _, o := range ops {
		out = append(out, protocol.FieldChange{Op: o.Operation, Path: o.Path, Value: o.Value})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// comparable is u without what the server sets on every write and the signature annotations.
func comparable(u *unstructured.Unstructured) map[string]any {
	c := u.DeepCopy()
	for _, f := range []string{"managedFields", "resourceVersion", "generation", "creationTimestamp", "uid"} {
		unstructured.RemoveNestedField(c.Object, "metadata", f)
	}
	unstructured.RemoveNestedField(c.Object, "status")
	c.SetAnnotations(signature.WithoutSignature(c.GetAnnotations()))
	return c.Object
}

func typedObject(s *runtime.Scheme, u *unstructured.Unstructured) (nexov1alpha1.Object, error) {
	o, err := s.New(u.GroupVersionKind())
	if err != nil {
		return nil, err
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, o); err != nil {
		return nil, fmt.Errorf("%s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	obj, ok := o.(nexov1alpha1.Object)
	if !ok {
		return nil, fmt.Errorf("%s is not a Nexo kind", u.GetKind())
	}
	return obj, nil
}

// reads reads Nexo objects from the cluster once per preview: a graph shared by a thousand
// proxies is read once, not a thousand times.
type reads struct {
	c    client.Client
	seen map[string]nexov1alpha1.Object // nil value: not found
}

func (r *reads) get(ctx context.Context, kind, ns, name string) (nexov1alpha1.Object, error) {
	k := key(kind, ns, name)
	if o, ok := r.seen[k]; ok {
		return o, nil
	}
	o, err := r.c.Scheme().New(nexov1alpha1.GroupVersion.WithKind(kind))
	if err != nil {
		return nil, fmt.Errorf("kind %s: %w", kind, err)
	}
	obj := o.(nexov1alpha1.Object)
	if err := r.c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, obj); err != nil {
		if !apierrors.IsNotFound(err) {
			return nil, err
		}
		obj = nil
	}
	r.seen[k] = obj
	return obj, nil
}

// candidate is a proxy the objects may touch: as the cluster holds it (nil when the objects
// create it) and as it would be after.
type candidate struct {
	live, next *nexov1alpha1.NexoProxy
}

// candidates are the namespace's proxies in the cluster, and those the objects create.
func candidates(ctx context.Context, ns string, after overlay, opts Options) ([]candidate, error) {
	var live []nexov1alpha1.NexoProxy
	if opts.Proxies != nil {
		var err error
		if live, err = opts.Proxies(ctx, ns); err != nil {
			return nil, fmt.Errorf("list the NexoProxies of %s: %w", ns, err)
		}
	}
	out := make([]candidate, 0, len(live))
	seen := map[string]bool{}
	for i := range live {
		p := &live[i]
		seen[p.Name] = true
		next := p
		if o, ok := after[key("NexoProxy", ns, p.Name)].(*nexov1alpha1.NexoProxy); ok {
			next = o
		}
		out = append(out, candidate{live: p, next: next})
	}
	for _, o := range after {
		if p, ok := o.(*nexov1alpha1.NexoProxy); ok && p.Namespace == ns && !seen[p.Name] {
			out = append(out, candidate{next: p})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].next.Name < out[j].next.Name })
	return out, nil
}

// proxyPreview is what the objects do to one proxy, or nil when its graph holds none of them.
func proxyPreview(ctx context.Context, read *reads, cand *candidate, after overlay, touched map[string]bool, opts Options) (*protocol.ProxyPreview, error) {
	live, next := cand.live, cand.next
	p := next
	fromCluster := getter(ctx, read, p.Namespace, nil)
	fromAfter := getter(ctx, read, p.Namespace, after)
	newGraph, newRefs, why, err := resolve(next, fromAfter, opts.OperatorNamespace)
	if err != nil {
		return nil, err
	}
	var oldGraph *render.Graph
	var oldRefs []string
	if live != nil {
		if oldGraph, oldRefs, _, err = resolve(live, fromCluster, opts.OperatorNamespace); err != nil {
			return nil, err
		}
	}
	hit := touched[key("NexoProxy", p.Namespace, p.Name)]
	for _, r := range append(newRefs, oldRefs...) {
		hit = hit || touched[r]
	}
	if !hit {
		return nil, nil
	}
	out := &protocol.ProxyPreview{Namespace: p.Namespace, Name: p.Name}
	if live != nil {
		out.Before = live.Status.GraphRevision
	}
	if why != "" {
		out.Outcome, out.Why = protocol.ProxyRefused, why
		return out, nil
	}
	out.After = render.Revision(newGraph)
	switch newer := rendered(newGraph, out.After, opts.OperatorNamespace); {
	case oldGraph == nil:
		out.Outcome = protocol.ProxyRolls
		if live != nil {
			out.Why = "its current graph does not resolve, so it runs no rendering of this build yet"
		}
	default:
		older := rendered(oldGraph, render.Revision(oldGraph), opts.OperatorNamespace)
		switch {
		case !equality.Semantic.DeepEqual(newer.deployment.Spec.Template, older.deployment.Spec.Template):
			out.Outcome = protocol.ProxyRolls
		case !equality.Semantic.DeepEqual(newer.deployment.Spec, older.deployment.Spec) || !equality.Semantic.DeepEqual(newer.service.Spec, older.service.Spec):
			out.Outcome = protocol.ProxyUpdates
		default:
			out.Outcome = protocol.ProxyUnchanged
		}
	}
	return out, nil
}

// get reads one Nexo object of the proxy's namespace: the dry-run result when the objects hold
// it, else the cluster's (nil, nil when it does not exist).
type get func(kind, name string) (nexov1alpha1.Object, bool, error)

func getter(ctx context.Context, read *reads, ns string, after overlay) get {
	return func(kind, name string) (nexov1alpha1.Object, bool, error) {
		if o, ok := after[key(kind, ns, name)]; ok {
			return o, true, nil
		}
		obj, err := read.get(ctx, kind, ns, name)
		return obj, false, err
	}
}

// resolve builds the proxy's graph as the operator does (NexoProxy.Graph, render.Graph.Add),
// returning the keys of every object it read and, instead of a graph, why the operator would
// refuse it: a reference missing, a kind this build does not reconcile, an invalid object, or
// (for an object the preview does not change) one that is not Ready.
func resolve(p *nexov1alpha1.NexoProxy, get get, operatorNamespace string) (*render.Graph, []string, string, error) {
	g := &render.Graph{Proxy: p, OperatorNamespace: operatorNamespace}
	var refs []string
	read := func(ref nexov1alpha1.GraphRef) (nexov1alpha1.Object, string, error) {
		refs = append(refs, key(ref.Kind, p.Namespace, ref.Name))
		if k, ok := catalog.Lookup(ref.Kind); !ok || k.Support != catalog.Reconciled {
			return nil, fmt.Sprintf("%s %s (%s) is a kind this operator does not reconcile", ref.Kind, ref.Name, ref.Where), nil
		}
		obj, changed, err := get(ref.Kind, ref.Name)
		switch {
		case err != nil:
			return nil, "", err
		case obj == nil:
			return nil, fmt.Sprintf("%s %s (%s) not found in namespace %s", ref.Kind, ref.Name, ref.Where, p.Namespace), nil
		}
		if errs := nexov1alpha1.Validate(obj); len(errs) > 0 {
			return nil, fmt.Sprintf("%s %s is invalid: %s", ref.Kind, ref.Name, errs.ToAggregate().Error()), nil
		}
		if ok, _ := nexov1alpha1.ReadyAndCurrent(obj); !changed && !ok {
			return nil, fmt.Sprintf("%s %s (%s) is not Ready", ref.Kind, ref.Name, ref.Where), nil
		}
		return obj, "", nil
	}
	if errs := p.Validate(); len(errs) > 0 {
		return nil, refs, fmt.Sprintf("NexoProxy %s is invalid: %s", p.Name, errs.ToAggregate().Error()), nil
	}
	all := p.Graph(nil)
	obj, why, err := read(all[0])
	if why != "" || err != nil {
		return nil, refs, why, err
	}
	g.Pipeline = obj.(*nexov1alpha1.NexoPipeline)
	for _, ref := range p.Graph(g.Pipeline)[1:] {
		obj, why, err := read(ref)
		if why != "" || err != nil {
			return nil, refs, why, err
		}
		switch ref.Role {
		case "profile":
			g.Profile = obj.(*nexov1alpha1.NexoDeploymentProfile)
		case "license":
		default:
			g.Add(ref.Kind, ref.Name, catalog.Slot(ref.Role), obj)
		}
	}
	if image := p.Spec.ProxyImage; image != "" && !g.Profile.Spec.Approves(image) {
		return nil, refs, nexov1alpha1.ImageNotApprovedMessage(image, g.Profile), nil
	}
	if clash := render.PortClash(g); clash != "" {
		return nil, refs, clash, nil
	}
	return g, refs, "", nil
}

// renderedProxy is what of the operator's rendering of a graph decides whether pods roll (the
// Deployment) or the proxy changes without rolling (its Deployment's other fields, the
// Service), Secret content held equal.
type renderedProxy struct {
	deployment *appsv1.Deployment
	service    *corev1.Service
}

func rendered(g *render.Graph, revision, operatorNamespace string) renderedProxy {
	var pull []*corev1.Secret
	for _, ps := range g.Profile.Spec.ImagePullSecrets {
		s := &corev1.Secret{Type: corev1.SecretTypeDockerConfigJson}
		s.Name, s.Namespace = ps.Name, operatorNamespace
		pull = append(pull, s)
	}
	in := render.Inputs{Revision: revision, ConfigHash: render.ConfigHash(render.ConfigData(g, revision), nil), PullSecrets: pull}
	out := renderedProxy{deployment: &appsv1.Deployment{}, service: &corev1.Service{}}
	for _, obj := range render.DeploymentChild.Render(g, in) {
		if d, ok := obj.(*appsv1.Deployment); ok {
			out.deployment = d
		}
	}
	for _, obj := range render.ServiceChild.Render(g, in) {
		if svc, ok := obj.(*corev1.Service); ok {
			out.service = svc
		}
	}
	return out
}

func summarize(r *protocol.PreviewResult) {
	s := protocol.PreviewSummary{}
	for _, o := range r.Objects {
		switch o.Outcome {
		case protocol.ObjectCreated:
			s.Created++
		case protocol.ObjectChanged:
			s.Changed++
		case protocol.ObjectUnchanged:
			s.Unchanged++
		case protocol.ObjectRefused:
			s.Refused++
		}
	}
	for _, p := range r.Proxies {
		switch p.Outcome {
		case protocol.ProxyRolls:
			s.Rolls++
		case protocol.ProxyRefused:
			s.ProxiesRefused++
		}
	}
	r.Summary = s
}

// bound keeps the answer within limit bytes: first the field changes go, then the unchanged
// objects, then every object, then the unchanged proxies, then every proxy; Truncated says
// which. The summary is never cut.
func bound(r *protocol.PreviewResult, limit int) {
	size := func() int { b, _ := json.Marshal(r); return len(b) }
	steps := []struct {
		what string
		drop func()
	}{
		{"field changes", func() {
			for i := range r.Objects {
				r.Objects[i].Changes = nil
			}
		}},
		{"unchanged objects", func() {
			r.Objects = slices.DeleteFunc(r.Objects, func(o protocol.ObjectPreview) bool { return o.Outcome == protocol.ObjectUnchanged })
		}},
		{"every object", func() { r.Objects = nil }},
		{"unchanged proxies", func() {
			r.Proxies = slices.DeleteFunc(r.Proxies, func(p protocol.ProxyPreview) bool { return p.Outcome == protocol.ProxyUnchanged })
		}},
		{"every proxy", func() { r.Proxies = nil }},
	}
	var dropped []string
	for _, step := range steps {
		if size() <= limit {
			break
		}
		step.drop()
		dropped = append(dropped, step.what)
	}
	if len(dropped) > 0 {
		r.Truncated = fmt.Sprintf("the answer is larger than %d bytes: %s left out; the summary counts everything", limit, strings.Join(dropped, ", "))
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}
