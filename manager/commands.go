package manager

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/catalog"
	"github.com/nexo-io/nexo-edge/contract/protocol"
	"github.com/nexo-io/nexo-edge/contract/signature"
	"github.com/nexo-io/nexo-edge/contract/wire"
	"github.com/nexo-io/nexo-edge/preview"
)

// legacyWorkloadConfig is why legacy workload configuration is refused (docs/protocol.md).
const legacyWorkloadConfig = "legacy workload configuration is not applied by this Manager: proxies are configured only through signed nexo.io objects (NexoProxy, NexoPipeline, NexoDeploymentProfile and the step kinds), which the operator validates and renders; send a deploy command with the equivalent Nexo objects instead; nothing was applied"

func failed(format string, args ...any) protocol.Ack {
	return protocol.Ack{Status: protocol.Failed, Message: fmt.Sprintf(format, args...)}
}

// handler executes one command type and says what it did (or why not) in its acknowledgement.
type handler func(a *Agent, ctx context.Context, cmd protocol.Command) protocol.Ack

// handlers are the Manager's side of the command table (protocol.Commands): one per row. The
// Manager advertises a row's capability only when it has its handler (commandCapabilities).
var handlers = map[string]handler{
	protocol.Deploy:    (*Agent).deploy,
	protocol.Rollout:   (*Agent).rollout,
	protocol.Upgrade:   (*Agent).upgrade,
	protocol.Uninstall: (*Agent).uninstall,
	protocol.Preview:   (*Agent).preview,
}

// commandCapabilities are the capabilities of the command types this Manager executes.
func commandCapabilities() []string {
	var out []string
	for _, c := range protocol.Commands {
		if _, ok := handlers[c.Name]; ok {
			out = append(out, c.Capability)
		}
	}
	return out
}

func (a *Agent) apply(ctx context.Context, cmd protocol.Command) protocol.Ack {
	if cmd.Type == protocol.WorkloadConfig {
		return failed(legacyWorkloadConfig)
	}
	if h, ok := handlers[cmd.Type]; ok {
		return h(a, ctx, cmd)
	}
	return failed("unknown command type %q: this Manager (%s) handles %s", cmd.Type, catalog.BuildVersion, strings.Join(protocol.CommandNames(), ", "))
}

// upgrade answers whether the installed bundle (read as heartbeats read it: the labels its
// installer wrote on the nexo-operator Deployment) is the target version. The Manager does not
// upgrade the bundle itself: it says who installed it and how to upgrade.
func (a *Agent) upgrade(ctx context.Context, cmd protocol.Command) protocol.Ack {
	op := &appsv1.Deployment{}
	if err := a.client.Get(ctx, client.ObjectKey{Namespace: a.cfg.Namespace, Name: wire.OperatorName}, op); err != nil {
		return failed("cannot read the installed bundle (Deployment %s/%s: %v); requested %s: nothing was changed", a.cfg.Namespace, wire.OperatorName, err, cmd.TargetVersion)
	}
	installed, by := installedBundle(op.Labels)
	switch {
	case installed == "":
		return failed("the Deployment %s/%s carries no installer version label (helm.sh/chart, olm.owner or app.kubernetes.io/version), so the installed bundle is unknown; requested %s: nothing was changed", a.cfg.Namespace, wire.OperatorName, cmd.TargetVersion)
	case installed == cmd.TargetVersion:
		return protocol.Ack{Status: protocol.Applied, Message: fmt.Sprintf("the installed bundle already is %s (installed by %s)", installed, by)}
	}
	return failed("the Manager does not upgrade the bundle itself (installed %s by %s, requested %s): upgrade with `nexoctl install`, `helm upgrade` or the OLM subscription, then the Manager reports the new version",
		installed, by, cmd.TargetVersion)
}

// deploy validates every manifest first (prepare), then has the API server validate every one
// of them (a server-side apply with dryRun=All, through preview.Run, which also predicts what
// each proxy the manifests touch will run), and writes nothing unless all pass; only then are
// they applied. The acknowledgement carries the prediction for the proxies, so the Control Plane
// can tell when they run it. A failure while applying (the API server changed its mind between
// dry run and apply, or went away) is reported with what was applied.
func (a *Agent) deploy(ctx context.Context, cmd protocol.Command) protocol.Ack {
	objs, adopted, refused := a.prepare(ctx, cmd, "applied")
	if refused != nil {
		return *refused
	}
	predicted, err := preview.Run(ctx, a.client, objs, a.previewOptions())
	if err != nil {
		return failed("%v; nothing was applied", err)
	}
	for _, o := range predicted.Objects {
		if o.Outcome == protocol.ObjectRefused {
			return failed("the API server refused %s %s/%s: %s; nothing was applied", o.Kind, o.Namespace, o.Name, o.Reason)
		}
	}
	for i, u := range objs {
		if err := a.client.Patch(ctx, u, client.Apply, client.FieldOwner(wire.ManagerFieldManager), client.ForceOwnership); err != nil {
			return failed("apply %s %s/%s: %v (%d of %d applied before it; the next delivery of a deploy converges them)", u.GetKind(), u.GetNamespace(), u.GetName(), err, i, len(objs))
		}
	}
	for _, w := range adopted {
		a.cfg.Log.Info("adopted a legacy object through the migration gate", "object", w)
	}
	msg := fmt.Sprintf("applied %d objects into %s", len(objs), strings.Join(cmd.Namespaces, ", "))
	if len(adopted) > 0 {
		msg += "; adopted " + strings.Join(adopted, ", ")
	}
	predicted.Objects = nil // the Control Plane has the manifests; the proxies' revisions are the news
	return protocol.Ack{Status: protocol.Applied, Message: msg, Preview: predicted}
}

// preview answers what a deploy of the command's manifests would do, checked exactly as a
// deploy checks them (prepare) and dry-run by the API server: it writes nothing.
func (a *Agent) preview(ctx context.Context, cmd protocol.Command) protocol.Ack {
	objs, _, refused := a.prepare(ctx, cmd, "previewed")
	if refused != nil {
		return *refused
	}
	res, err := preview.Run(ctx, a.client, objs, a.previewOptions())
	if err != nil {
		return failed("%v; nothing was previewed", err)
	}
	s := res.Summary
	return protocol.Ack{Status: protocol.Applied, Preview: res, Message: fmt.Sprintf(
		"previewed %d objects: %d created, %d changed, %d unchanged, %d refused; %d proxies roll, %d refused; nothing was changed",
		len(objs), s.Created, s.Changed, s.Unchanged, s.Refused, s.Rolls, s.ProxiesRefused)}
}

// previewOptions are how this Manager previews: as the field manager it applies with, and over
// every NexoProxy of a namespace (a shared pipeline may be used by a proxy it does not own).
func (a *Agent) previewOptions() preview.Options {
	return preview.Options{FieldManager: wire.ManagerFieldManager, OperatorNamespace: a.cfg.Namespace,
		Proxies: func(ctx context.Context, ns string) ([]nexov1alpha1.NexoProxy, error) {
			var list nexov1alpha1.NexoProxyList
			err := a.client.List(ctx, &list, client.InNamespace(ns))
			return list.Items, err
		}}
}

// prepare checks every manifest of a deploy or a preview before anything reaches the API
// server (nexo.io kind, allowed namespace, valid signature for this environment, a revision
// not older than the object's, ownership) and returns them ready to apply (owner label set).
// A refusal says "nothing was <done>".
func (a *Agent) prepare(ctx context.Context, cmd protocol.Command, done string) ([]*unstructured.Unstructured, []string, *protocol.Ack) {
	refuse := func(format string, args ...any) ([]*unstructured.Unstructured, []string, *protocol.Ack) {
		ack := failed(format+"; nothing was "+done, args...)
		return nil, nil, &ack
	}
	trusted, err := a.trustedKeys()
	if err != nil {
		return refuse("cannot read the trusted signing keys: %v", err)
	}
	audience, owner := a.environment(), a.OwnerID()
	var objs []*unstructured.Unstructured
	var adopted []string
	for i, raw := range cmd.Manifests {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(raw); err != nil {
			return refuse("manifest %d is not an object: %v", i, err)
		}
		where := fmt.Sprintf("manifest %d (%s %s/%s)", i, u.GetKind(), u.GetNamespace(), u.GetName())
		if _, ok := catalog.Lookup(u.GetKind()); !ok || u.GroupVersionKind().Group != catalog.Group {
			return refuse("%s: only nexo.io kinds are deployed (a raw workload object is legacy workload configuration: send the equivalent Nexo objects instead)", where)
		}
		if !slices.Contains(cmd.Namespaces, u.GetNamespace()) {
			return refuse("%s: namespace not named by the command (%s)", where, strings.Join(cmd.Namespaces, ", "))
		}
		if w := a.cfg.WatchNamespaces; len(w) > 0 && !slices.Contains(w, u.GetNamespace()) {
			return refuse("%s: this installation serves only %s (its OperatorGroup's target namespaces, --watch-namespaces)", where, strings.Join(w, ", "))
		}
		if !a.cfg.Limits.AllowsNamespace(u.GetNamespace()) {
			return refuse("%s: namespace %s is outside this cluster's deploy limit (%s); %s", where, u.GetNamespace(), limitList(a.cfg.Limits.Namespaces), protocol.NamespaceLimitHint(u.GetNamespace()))
		}
		if img, _, _ := unstructured.NestedString(u.Object, "spec", "proxyImage"); img != "" && !a.cfg.Limits.AllowsImage(img) {
			return refuse("%s: image %s is outside this cluster's image repositories (%s); %s", where, img, limitList(a.cfg.Limits.ImageRepositories), imageHint(img))
		}
		signed, err := signature.Verify(u, trusted, audience)
		if err != nil {
			return refuse("%s: %v", where, err)
		}
		existing := &unstructured.Unstructured{}
		existing.SetGroupVersionKind(u.GroupVersionKind())
		err = a.client.Get(ctx, client.ObjectKeyFromObject(u), existing)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return refuse("%s: %v", where, err)
		case existing.GetLabels()[wire.OwnerLabel] == owner:
		case a.cfg.AllowAdoption && existing.GetAnnotations()[wire.AdoptAnnotation] == "true":
			adopted = append(adopted, where)
		default:
			return refuse("%s already exists and is not owned by this Manager; it is left untouched (to adopt it, run the Manager with --allow-adoption and annotate it %s=true)", where, wire.AdoptAnnotation)
		}
		if err == nil {
			if have := existingRevision(existing); signed.Revision < have {
				return refuse("%s: signature revision %d is older than revision %d in the cluster (an older manifest replayed)", where, signed.Revision, have)
			}
		}
		labels := u.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[wire.OwnerLabel] = owner // labels are not part of the signature
		u.SetLabels(labels)
		u.SetManagedFields(nil)
		u.SetResourceVersion("")
		objs = append(objs, u)
	}
	return objs, adopted, nil
}

// existingRevision is the signature revision of an object in the cluster (0 when unsigned).
func existingRevision(u *unstructured.Unstructured) int64 {
	rev, _ := strconv.ParseInt(u.GetAnnotations()[wire.RevisionAnnotation], 10, 64)
	return rev
}

// rollout sets the proxy image on the Manager-owned NexoProxies (or the one named). Signed
// proxies come re-signed with the command and are applied like a deploy (owned ones only); the
// image is set directly only on proxies that are not Control-Plane signed.
func (a *Agent) rollout(ctx context.Context, cmd protocol.Command) protocol.Ack {
	if !a.cfg.Limits.AllowsImage(cmd.Image) {
		return failed("image %s is outside this cluster's image repositories (%s); %s; nothing was changed", cmd.Image, limitList(a.cfg.Limits.ImageRepositories), imageHint(cmd.Image))
	}
	if msg, err := a.unapproved(ctx, cmd); err != nil {
		return failed("read the proxies' profiles: %v; nothing was changed", err)
	} else if msg != "" {
		return failed("%s; nothing was changed", msg)
	}
	resigned := map[string]bool{}
	var predicted *protocol.PreviewResult
	if len(cmd.Manifests) > 0 {
		ack := a.deploy(ctx, protocol.Command{Namespaces: cmd.Namespaces, Manifests: cmd.Manifests})
		if ack.Status != protocol.Applied {
			return ack
		}
		predicted = ack.Preview // the re-signed proxies' new graph revisions
		for _, raw := range cmd.Manifests {
			u := &unstructured.Unstructured{}
			if u.UnmarshalJSON(raw) == nil {
				resigned[u.GetNamespace()+"/"+u.GetName()] = true
			}
		}
	}
	proxies, err := a.ownedProxies(ctx)
	if err != nil {
		return failed("list owned proxies: %v", err)
	}
	var changed, outside []string
	for i := range proxies {
		p := &proxies[i]
		if cmd.Proxy != nil && (p.Namespace != cmd.Proxy.Namespace || p.Name != cmd.Proxy.Name) {
			continue
		}
		if !a.cfg.Limits.AllowsNamespace(p.Namespace) {
			outside = append(outside, p.Namespace+"/"+p.Name)
			continue
		}
		if resigned[p.Namespace+"/"+p.Name] {
			changed = append(changed, p.Namespace+"/"+p.Name)
			continue
		}
		if string(p.Spec.ProxyImage) == cmd.Image {
			continue
		}
		if signature.IsManaged(p.Labels, p.Annotations) {
			return failed("NexoProxy %s/%s is Control-Plane signed but the rollout did not carry it re-signed; nothing more was changed (%d already changed)", p.Namespace, p.Name, len(changed))
		}
		patch := client.MergeFrom(p.DeepCopy())
		p.Spec.ProxyImage = nexov1alpha1.Image(cmd.Image)
		if err := a.client.Patch(ctx, p, patch, client.FieldOwner(wire.ManagerFieldManager)); err != nil {
			return failed("set the image on %s/%s: %v (%d already changed)", p.Namespace, p.Name, err, len(changed))
		}
		changed = append(changed, p.Namespace+"/"+p.Name)
	}
	if cmd.Proxy != nil && len(changed) == 0 && !slices.ContainsFunc(proxies, func(p nexov1alpha1.NexoProxy) bool {
		return p.Namespace == cmd.Proxy.Namespace && p.Name == cmd.Proxy.Name
	}) {
		return failed("NexoProxy %s/%s is not owned by this Manager; nothing was changed", cmd.Proxy.Namespace, cmd.Proxy.Name)
	}
	msg := fmt.Sprintf("image %s set on %d proxies", cmd.Image, len(changed))
	if len(outside) > 0 {
		msg += fmt.Sprintf("; left %s alone: outside this cluster's deploy limit (%s)", strings.Join(outside, ", "), LimitsSetIn)
	}
	return protocol.Ack{Status: protocol.Applied, Message: msg, Preview: predicted}
}

// unapproved says which proxies a rollout would move to an image their NexoDeploymentProfile
// does not approve (the operator would refuse them, Validated=False, and they would stay on
// their last revision, Degraded): it is checked before anything is written, for the proxies the
// rollout targets and the re-signed ones it carries.
func (a *Agent) unapproved(ctx context.Context, cmd protocol.Command) (string, error) {
	proxies, err := a.ownedProxies(ctx)
	if err != nil {
		return "", err
	}
	for _, raw := range cmd.Manifests {
		p := nexov1alpha1.NexoProxy{}
		if json.Unmarshal(raw, &p) == nil && p.Kind == "NexoProxy" {
			proxies = append(proxies, p)
		}
	}
	profiles := map[types.NamespacedName]*nexov1alpha1.NexoDeploymentProfile{}
	var refused []string
	for _, p := range proxies {
		if cmd.Proxy != nil && (p.Namespace != cmd.Proxy.Namespace || p.Name != cmd.Proxy.Name) || !a.cfg.Limits.AllowsNamespace(p.Namespace) {
			continue
		}
		key := types.NamespacedName{Namespace: p.Namespace, Name: p.Spec.ProfileRef.Name}
		profile, seen := profiles[key]
		if !seen {
			profile = &nexov1alpha1.NexoDeploymentProfile{}
			if err := a.client.Get(ctx, key, profile); err != nil {
				if !apierrors.IsNotFound(err) {
					return "", err
				}
				profile = nil
			}
			profiles[key] = profile
		}
		switch {
		case profile == nil:
			refused = append(refused, fmt.Sprintf("%s/%s (its NexoDeploymentProfile %s is not found)", p.Namespace, p.Name, key.Name))
		case !profile.Spec.Approves(nexov1alpha1.Image(cmd.Image)):
			refused = append(refused, fmt.Sprintf("%s/%s (NexoDeploymentProfile %s approves %s)", p.Namespace, p.Name, key.Name, profile.Spec.ApprovedList()))
		}
	}
	if len(refused) == 0 {
		return "", nil
	}
	slices.Sort(refused)
	refused = slices.Compact(refused)
	return fmt.Sprintf("image %s is not approved for %s: the operator would refuse it (ImageNotApproved) and the proxies would stay on their last revision; "+
		"the profile's owner adds it to spec.approvedImages first", cmd.Image, strings.Join(refused, ", ")), nil
}

// uninstall deletes one Manager-owned NexoProxy; owner references remove its children.
func (a *Agent) uninstall(ctx context.Context, cmd protocol.Command) protocol.Ack {
	if cmd.Proxy == nil {
		return failed("uninstall needs a proxy")
	}
	if !a.cfg.Limits.AllowsNamespace(cmd.Proxy.Namespace) {
		return failed("namespace %s is outside this cluster's deploy limit (%s); %s; nothing was deleted", cmd.Proxy.Namespace, limitList(a.cfg.Limits.Namespaces), protocol.NamespaceLimitHint(cmd.Proxy.Namespace))
	}
	p := &nexov1alpha1.NexoProxy{}
	key := types.NamespacedName{Namespace: cmd.Proxy.Namespace, Name: cmd.Proxy.Name}
	if err := a.client.Get(ctx, key, p); err != nil {
		if apierrors.IsNotFound(err) {
			return protocol.Ack{Status: protocol.Applied, Message: fmt.Sprintf("NexoProxy %s is already gone", key)}
		}
		return failed("read NexoProxy %s: %v", key, err)
	}
	if p.Labels[wire.OwnerLabel] != a.OwnerID() {
		return failed("NexoProxy %s is not owned by this Manager; nothing was deleted", key)
	}
	uid := p.UID
	if err := a.client.Delete(ctx, p, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
		return failed("delete NexoProxy %s: %v", key, err)
	}
	return protocol.Ack{Status: protocol.Applied, Message: fmt.Sprintf("deleted NexoProxy %s; garbage collection removes its children", key)}
}

// LimitsSetIn says where a cluster admin sets the Manager's limits, for every refusal.
const LimitsSetIn = "the cluster admin sets it: chart values manager.deployNamespaces and manager.allowedImageRepositories; kustomize: ConfigMap nexo-manager-limits; OLM: Subscription config.env NEXO_DEPLOY_NAMESPACES and NEXO_ALLOWED_IMAGE_REPOSITORIES"

// imageHint names the repository of image to add to the image limit.
func imageHint(image string) string {
	repo, err := protocol.ImageRepository(image)
	if err != nil {
		repo = image
	}
	return protocol.ImageLimitHint(repo)
}

func limitList(l []string) string {
	if len(l) == 0 {
		return "none"
	}
	return strings.Join(l, ", ")
}
