package upgrade

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/catalog"
	"github.com/nexo-io/nexo-edge/controllers/render"
)

// ProxyOutcome is what upgrading the operator does to one NexoProxy's Deployment.
type ProxyOutcome struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Outcome: rolls (the pod template changes: new pods, one at a time), updates (the
	// Deployment is written, its pods stay), unchanged, refused (this build's operator would
	// refuse the proxy, Why says why: it keeps running its last revision, Degraded, until it is
	// fixed), or skipped (Why says why it cannot be predicted: not Ready, no Deployment yet).
	Outcome string `json:"outcome"`
	Why     string `json:"why,omitempty"`
}

// Outcomes of ProxyOutcome.
const (
	OutcomeRolls     = "rolls"
	OutcomeUpdates   = "updates"
	OutcomeUnchanged = "unchanged"
	OutcomeRefused   = "refused"
	OutcomeSkipped   = "skipped"
)

// Predict predicts, for every NexoProxy, whether this build's operator would change its
// Deployment: it resolves the proxy's graph from the live objects as the operator does
// (NexoProxy.Graph), renders the Deployment with this build's renderer (render.Children) and
// compares it with the live one the way the operator decides to write (ChildKind.InSync), and
// its pod template the way the Deployment controller decides to roll. Secrets are read to hash
// them (the config hash covers them) and nothing of them is kept or printed. operatorNamespace
// holds the profiles' image-pull Secrets.
func Predict(ctx context.Context, c client.Client, operatorNamespace string) ([]ProxyOutcome, error) {
	proxies := &nexov1alpha1.NexoProxyList{}
	if err := c.List(ctx, proxies); err != nil {
		return nil, err
	}
	var out []ProxyOutcome
	for i := range proxies.Items {
		p := &proxies.Items[i]
		o := ProxyOutcome{Namespace: p.Namespace, Name: p.Name}
		o.Outcome, o.Why = predict(ctx, c, p, operatorNamespace)
		out = append(out, o)
	}
	return out, nil
}

func predict(ctx context.Context, c client.Client, p *nexov1alpha1.NexoProxy, operatorNamespace string) (string, string) {
	// This build runs only images the proxy's profile approves (spec.images, spec.approvedImages):
	// a proxy that selects another is refused, Ready or not.
	if image := p.Spec.ProxyImage; image != "" {
		profile := &nexov1alpha1.NexoDeploymentProfile{}
		err := c.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: p.Spec.ProfileRef.Name}, profile)
		if err == nil && !profile.Spec.Approves(image) {
			return OutcomeRefused, nexov1alpha1.ImageNotApprovedMessage(image, profile)
		}
	}
	if ok, _ := nexov1alpha1.ReadyAndCurrent(p); !ok {
		return OutcomeSkipped, "not Ready: the operator keeps its last good revision until its graph is fixed"
	}
	live := &appsv1.Deployment{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: p.Name}, live); err != nil {
		if apierrors.IsNotFound(err) {
			return OutcomeSkipped, "it has no Deployment yet"
		}
		return OutcomeSkipped, "cannot read its Deployment: " + string(apierrors.ReasonForError(err))
	}
	g, secrets, pullSecrets, err := resolve(ctx, c, p, operatorNamespace)
	if err != nil {
		return OutcomeSkipped, err.Error()
	}
	revision := render.Revision(g)
	in := render.Inputs{Revision: revision, ConfigHash: render.ConfigHash(render.ConfigData(g, revision), secrets), PullSecrets: pullSecrets}
	var desired *appsv1.Deployment
	for _, obj := range render.DeploymentChild.Render(g, in) {
		if d, ok := obj.(*appsv1.Deployment); ok && d.Name == p.Name {
			desired = d
		}
	}
	if desired == nil {
		return OutcomeSkipped, "this build renders no Deployment for it"
	}
	switch {
	case !equality.Semantic.DeepDerivative(desired.Spec.Template, live.Spec.Template) ||
		!equality.Semantic.DeepEqual(desired.Spec.Template.Annotations, live.Spec.Template.Annotations):
		return OutcomeRolls, ""
	case !render.DeploymentChild.InSync(desired, live):
		return OutcomeUpdates, ""
	}
	return OutcomeUnchanged, ""
}

// resolve reads a Ready proxy's graph as the operator does: the pipeline, its router and steps,
// the observability objects, the profile, and the content of every Secret they reference.
func resolve(ctx context.Context, c client.Client, p *nexov1alpha1.NexoProxy, operatorNamespace string) (*render.Graph, map[string]map[string][]byte, []*corev1.Secret, error) {
	g := &render.Graph{Proxy: p, OperatorNamespace: operatorNamespace}
	secrets := map[string]map[string][]byte{}
	var secretKeys []types.NamespacedName
	get := func(kind, name string) (nexov1alpha1.Object, error) {
		o, err := c.Scheme().New(schema.GroupVersionKind{Group: catalog.Group, Version: catalog.Version, Kind: kind})
		if err != nil {
			return nil, err
		}
		obj := o.(nexov1alpha1.Object)
		if err := c.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: name}, obj); err != nil {
			return nil, fmt.Errorf("%s %s: %s", kind, name, apierrors.ReasonForError(err))
		}
		return obj, nil
	}
	refs := p.Graph(nil)
	pipeline, err := get(refs[0].Kind, refs[0].Name)
	if err != nil {
		return nil, nil, nil, err
	}
	g.Pipeline = pipeline.(*nexov1alpha1.NexoPipeline)
	for _, ref := range p.Graph(g.Pipeline)[1:] {
		obj, err := get(ref.Kind, ref.Name)
		if err != nil {
			return nil, nil, nil, err
		}
		switch ref.Role {
		case "profile":
			g.Profile = obj.(*nexov1alpha1.NexoDeploymentProfile)
			continue
		case "license":
			continue
		}
		g.Add(ref.Kind, ref.Name, catalog.Slot(ref.Role), obj)
		for _, s := range nexov1alpha1.SecretNamesOf(obj) {
			secretKeys = append(secretKeys, types.NamespacedName{Namespace: p.Namespace, Name: s})
		}
	}
	if g.Profile == nil {
		return nil, nil, nil, fmt.Errorf("no NexoDeploymentProfile")
	}
	for _, s := range nexov1alpha1.SecretNamesOf(p) {
		secretKeys = append(secretKeys, types.NamespacedName{Namespace: p.Namespace, Name: s})
	}
	var pullSecrets []*corev1.Secret
	read := func(key types.NamespacedName) (*corev1.Secret, error) {
		s := &corev1.Secret{}
		if err := c.Get(ctx, key, s); err != nil {
			return nil, fmt.Errorf("Secret %s: %s", key, apierrors.ReasonForError(err))
		}
		secrets[key.String()] = s.Data
		return s, nil
	}
	for _, key := range secretKeys {
		if _, err := read(key); err != nil {
			return nil, nil, nil, err
		}
	}
	for _, ps := range g.Profile.Spec.ImagePullSecrets {
		s, err := read(types.NamespacedName{Namespace: operatorNamespace, Name: ps.Name})
		if err != nil {
			return nil, nil, nil, err
		}
		pullSecrets = append(pullSecrets, s)
	}
	return g, secrets, pullSecrets, nil
}
