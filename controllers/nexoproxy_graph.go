package controllers

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/catalog"
	"github.com/nexo-io/nexo-edge/contract/wire"
	"github.com/nexo-io/nexo-edge/controllers/render"
)

// blocked is why a phase cannot pass. wait means a later change (a reference created or
// becoming Ready) may unblock it, so the proxy is Pending rather than Failed.
type blocked struct {
	reason, message string
	wait            bool
}

// resolved is everything the proxy's graph needs, read in one pass.
type resolved struct {
	graph   *render.Graph
	license *nexov1alpha1.NexoLicense
	// secrets is the content of every referenced Secret, keyed by "<namespace>/<name>".
	secrets map[string]map[string][]byte
	// pullSecrets are the profile's pull Secrets, from the operator namespace.
	pullSecrets []*corev1.Secret
	// secretNames are all Secrets the resolution looked at (found or not), for re-queueing.
	secretNames []types.NamespacedName
	// unshareable names the profile's pull Secrets that may not be copied (their copies go).
	unshareable []string
}

// resolve reads the proxy's graph (NexoProxy.Graph: pipeline, router, steps, observability
// objects, profile, license) and its Secrets. Every referenced Nexo object must exist, be
// reconciled by this build and be Ready for its current generation.
func (r *ProxyReconciler) resolve(ctx context.Context, proxy *nexov1alpha1.NexoProxy) (*resolved, *blocked, error) {
	res := &resolved{graph: &render.Graph{Proxy: proxy, OperatorNamespace: r.OperatorNamespace}, secrets: map[string]map[string][]byte{}}
	ns := proxy.Namespace

	refs := proxy.Graph(nil)
	pipeline := &nexov1alpha1.NexoPipeline{}
	if b, err := r.get(ctx, ns, refs[0].Kind, refs[0].Name, refs[0].Where, pipeline); b != nil || err != nil {
		return nil, b, err
	}
	// Unsupported or misplaced kinds are named here, whatever the pipeline's own status says.
	if bad := invalidOf(pipeline.Validate()); bad != nil {
		return nil, &blocked{reason: bad.reason, message: fmt.Sprintf("NexoPipeline %s: %s", pipeline.Name, bad.message)}, nil
	}
	if b := notReady(pipeline, refs[0].Kind, pipeline.Name, refs[0].Where); b != nil {
		return nil, b, nil
	}
	res.graph.Pipeline = pipeline
	proxyChecked := false
	for _, ref := range proxy.Graph(pipeline)[1:] {
		if ref.Depth == 1 && !proxyChecked {
			// Past the pipeline's references: the proxy's own are checked before they are read.
			proxyChecked = true
			if bad := invalidOf(proxy.Validate()); bad != nil {
				return nil, &blocked{reason: bad.reason, message: bad.message}, nil
			}
		}
		switch ref.Role {
		case "profile":
			profile := &nexov1alpha1.NexoDeploymentProfile{}
			if b, err := r.get(ctx, ns, ref.Kind, ref.Name, ref.Where, profile); b != nil || err != nil {
				return nil, b, err
			}
			if b := notReady(profile, ref.Kind, profile.Name, ref.Where); b != nil {
				return nil, b, nil
			}
			res.graph.Profile = profile
		case "license":
			lic := &nexov1alpha1.NexoLicense{}
			if b, err := r.get(ctx, ns, ref.Kind, ref.Name, ref.Where, lic); b != nil || err != nil {
				return nil, b, err
			}
			res.license = lic
		default: // a pipeline component or an observability object
			obj, b, err := r.getReadyKind(ctx, ns, ref.Kind, ref.Name, ref.Where)
			if b != nil || err != nil {
				return nil, b, err
			}
			res.graph.Add(ref.Kind, ref.Name, catalog.Slot(ref.Role), obj)
			res.addSecrets(ns, obj)
		}
	}
	profile := res.graph.Profile
	if b := portConflict(res.graph); b != nil {
		return nil, b, nil
	}
	res.addSecrets(ns, proxy)

	// Read every referenced Secret; remember them all so their creation re-queues the proxy.
	for _, s := range res.secretNames {
		secret, err := r.readSecret(ctx, s)
		if err != nil {
			if apierrors.IsNotFound(err) {
				return res, &blocked{nexov1alpha1.ReasonReferenceNotFound, fmt.Sprintf("Secret %s not found in namespace %s", s.Name, s.Namespace), true}, nil
			}
			return res, nil, err
		}
		res.secrets[s.String()] = secret.Data
	}
	if b := missingKey(res.graph, res.secrets); b != nil {
		return res, b, nil
	}
	for _, ps := range profile.Spec.ImagePullSecrets {
		key := types.NamespacedName{Namespace: r.OperatorNamespace, Name: ps.Name}
		res.secretNames = append(res.secretNames, key)
		secret, err := r.readSecret(ctx, key)
		if err != nil {
			if apierrors.IsNotFound(err) {
				return res, &blocked{nexov1alpha1.ReasonReferenceNotFound, fmt.Sprintf("image-pull Secret %s (NexoDeploymentProfile %s) not found in the operator namespace %s; installation puts registry credentials there (nexoctl install --registry-secret %s=FILE)",
					ps.Name, profile.Name, r.OperatorNamespace, ps.Name), true}, nil
			}
			return res, nil, err
		}
		if !shareable(secret) {
			res.unshareable = append(res.unshareable, ps.Name)
			return res, &blocked{reason: nexov1alpha1.ReasonPullSecretNotShareable, message: fmt.Sprintf(
				"image-pull Secret %s (NexoDeploymentProfile %s) in the operator namespace %s is not a shareable registry credential (type %s, label %s=%q): only Secrets of type %s or %s that the installer labelled %s=true are copied into proxy namespaces, and nothing was copied; mark a registry credential with nexoctl install --registry-secret %s=FILE, or remove it from the profile",
				ps.Name, profile.Name, r.OperatorNamespace, secret.Type, wire.RegistryCredentialLabel, secret.Labels[wire.RegistryCredentialLabel],
				corev1.SecretTypeDockerConfigJson, corev1.SecretTypeDockercfg, wire.RegistryCredentialLabel, ps.Name)}, nil
		}
		res.pullSecrets = append(res.pullSecrets, secret)
		res.secrets[key.String()] = secret.Data
	}
	return res, nil, nil
}

// portConflict refuses a graph whose pod would have two listeners on one port: a NexoMetrics on
// the proxy's own port (found by sending rendered random graphs to an API server: the Service
// would be refused as a duplicate port, and the proxy stall half-applied), or either on a port
// the pod keeps for egress and its step containers.
func portConflict(g *render.Graph) *blocked {
	clash := render.PortClash(g)
	if clash == "" {
		return nil
	}
	return &blocked{reason: nexov1alpha1.ReasonPortConflict, message: clash + "; give the NexoMetrics another port (for example 9216) or the proxy another spec.port"}
}

// missingKey refuses a graph whose runtime would read a key its Secret does not have: the
// container would start without a file the config names. A later edit of the Secret unblocks it.
func missingKey(g *render.Graph, secrets map[string]map[string][]byte) *blocked {
	check := func(what string, uses []nexov1alpha1.SecretUse) *blocked {
		for _, u := range uses {
			data := secrets[types.NamespacedName{Namespace: g.Proxy.Namespace, Name: u.Name}.String()]
			for _, k := range u.Keys {
				if _, ok := data[k]; !ok {
					return &blocked{nexov1alpha1.ReasonSecretKeyMissing, fmt.Sprintf(
						"Secret %s has no key %q, which %s reads (%s); add the key to the Secret, or point %s at a Secret that has it",
						u.Name, k, what, u.Field, u.Field), true}
				}
			}
		}
		return nil
	}
	if b := check("NexoProxy "+g.Proxy.Name, nexov1alpha1.SecretUsesOf(g.Proxy)); b != nil {
		return b
	}
	components := append(slices.Clone(g.Steps), g.Observability...)
	if g.Router != nil {
		components = append(components, *g.Router)
	}
	for _, c := range components {
		if b := check(c.Kind+" "+c.Name, c.SecretUses); b != nil {
			return b
		}
	}
	return nil
}

// shareable reports whether a Secret of the operator namespace may be copied into a proxy
// namespace: a registry credential type, explicitly marked by the installer (docs/security.md, "Pull-Secret copies").
func shareable(s *corev1.Secret) bool {
	return render.ShareableRegistryType(s.Type) && s.Labels[wire.RegistryCredentialLabel] == "true"
}

// get reads a typed Nexo object; a missing one blocks the proxy until it is created.
func (r *ProxyReconciler) get(ctx context.Context, ns, kind, name, where string, obj nexov1alpha1.Object) (*blocked, error) {
	if err := r.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return &blocked{nexov1alpha1.ReasonReferenceNotFound, fmt.Sprintf("%s %s (%s) not found in namespace %s", kind, name, where, ns), true}, nil
		}
		return nil, err
	}
	return nil, nil
}

// notReady blocks the proxy until obj is Ready for its current generation.
func notReady(obj nexov1alpha1.Object, kind, name, where string) *blocked {
	ok, c := nexov1alpha1.ReadyAndCurrent(obj)
	if ok {
		return nil
	}
	msg := fmt.Sprintf("%s %s (%s) is not Ready yet", kind, name, where)
	if c != nil && c.Status == "False" {
		msg = fmt.Sprintf("%s %s (%s) is not Ready: %s: %s", kind, name, where, c.Reason, c.Message)
	}
	return &blocked{nexov1alpha1.ReasonReferenceNotReady, msg, true}
}

// getReadyKind reads and checks a kind named at runtime; schema-only kinds are refused by name.
func (r *ProxyReconciler) getReadyKind(ctx context.Context, ns, kind, name, where string) (nexov1alpha1.Object, *blocked, error) {
	if k, ok := catalog.Lookup(kind); !ok || k.Support != catalog.Reconciled {
		return nil, &blocked{reason: nexov1alpha1.ReasonUnsupportedReference, message: where + ": " + catalog.UnsupportedMessage(kind)}, nil
	}
	o, err := r.Scheme.New(nexov1alpha1.GroupVersion.WithKind(kind))
	if err != nil {
		return nil, nil, err
	}
	obj := o.(nexov1alpha1.Object)
	if b, err := r.get(ctx, ns, kind, name, where, obj); b != nil || err != nil {
		return nil, b, err
	}
	return obj, notReady(obj, kind, name, where), nil
}

// addSecrets adds the Secrets obj references in namespace ns to res.secretNames.
func (res *resolved) addSecrets(ns string, obj nexov1alpha1.Object) {
	for _, name := range nexov1alpha1.SecretNamesOf(obj) {
		res.secretNames = append(res.secretNames, types.NamespacedName{Namespace: ns, Name: name})
	}
}

// readSecret returns a Secret's content. The metadata-only informer knows every Secret's current
// resourceVersion; the content is fetched from the API server only when it moved, so a Secret
// shared by many proxies is read once, and only referenced Secrets are held in memory.
func (r *ProxyReconciler) readSecret(ctx context.Context, key types.NamespacedName) (*corev1.Secret, error) {
	if m, ok := r.secretMeta.Get(key); ok {
		if cached := r.secrets.content(key, m.ResourceVersion); cached != nil {
			return cached, nil
		}
	}
	secret := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, key, secret); err != nil {
		return nil, err
	}
	r.secrets.store(key, secret)
	return secret, nil
}
