package controllers

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/contract/wire"
	"github.com/nexo-io/nexo-edge/controllers/render"
	"github.com/nexo-io/nexo-edge/controllers/slimcache"
)

// FieldOwner is the operator's field manager on every write.
const FieldOwner = client.FieldOwner(wire.OperatorName)

// child is one generated object: what we want, what the cache shows, and how to compare and
// correct the whole object when it has to be read.
//
// The caches hold children trimmed to their metadata (Deployments as a DeploymentState; see
// controllers/slimcache). A child is in sync without any read when its version (generation
// and labels for the Deployment, whose status moves all the time; resourceVersion otherwise) is
// the one at which
// the operator last wrote it or compared it in full, and the desired content is the same as then
// (render.ContentHash). Otherwise the whole object is read from the API server, compared, and
// corrected if it drifted.
type child struct {
	desired client.Object
	// cached is the cache's state of the child (ChildMeta, DeploymentState) or the whole object
	// once read or written; full receives the whole object when read.
	cached, full client.Object
	// from reads the child's state from the cache.
	from    func(types.NamespacedName) (client.Object, bool)
	version func(client.Object) string
	inSync  func() bool
	correct func()
	found   bool
}

func resourceVersion(o client.Object) string { return o.GetResourceVersion() }

// metadataChild is a child (ConfigMap, Secret or Service) whose cache holds only its metadata.
func metadataChild(desired, full client.Object, store slimcache.Store[*slimcache.ChildMeta], inSync func() bool, correct func()) *child {
	return &child{desired: desired, full: full, from: storeReader(store), version: resourceVersion, inSync: inSync, correct: correct}
}

func storeReader[T client.Object](s slimcache.Store[T]) func(types.NamespacedName) (client.Object, bool) {
	return func(key types.NamespacedName) (client.Object, bool) {
		v, ok := s.Get(key)
		if !ok {
			return nil, false
		}
		return v, true
	}
}

// apply creates or corrects the proxy's children. A converged proxy costs no API call and a new
// one costs only its creates. A name held by someone else is a Conflict: nothing is overwritten,
// and children this pass created are removed again, so a conflict leaves nothing half-applied.
func (r *ProxyReconciler) apply(ctx context.Context, proxy *nexov1alpha1.NexoProxy, res *resolved, configHash, revision string) (*slimcache.DeploymentState, *blocked, error) {
	g := res.graph
	proxyKey := client.ObjectKeyFromObject(proxy)
	var children []*child
	for _, cm := range render.ConfigMaps(g, revision) {
		existing := &corev1.ConfigMap{}
		children = append(children, metadataChild(cm, existing, r.configMaps,
			func() bool { return equality.Semantic.DeepEqual(cm.Data, existing.Data) && labelsSubset(cm, existing) },
			func() { existing.Data = cm.Data; mergeLabels(cm, existing) }))
	}
	for _, src := range res.pullSecrets {
		s := render.PullSecret(g, src)
		existing := &corev1.Secret{}
		children = append(children, metadataChild(s, existing, r.secretMeta,
			func() bool {
				return equality.Semantic.DeepEqual(s.Data, existing.Data) && s.Type == existing.Type && labelsSubset(s, existing) &&
					existing.Annotations[render.CopiedFromKey] == s.Annotations[render.CopiedFromKey]
			},
			func() {
				existing.Data, existing.Type = s.Data, s.Type
				mergeLabels(s, existing)
				existing.Annotations = maps.Clone(s.Annotations)
			}))
	}
	dep := render.Deployment(g, configHash, revision)
	fullDep := &appsv1.Deployment{}
	depChild := &child{desired: dep, full: fullDep, from: storeReader(r.deployments), version: deploymentVersion,
		inSync:  func() bool { return deploymentInSync(dep, fullDep) },
		correct: func() { fullDep.Spec = dep.Spec; mergeLabels(dep, fullDep) }}
	children = append(children, depChild)
	svc := render.Service(g)
	existingSvc := &corev1.Service{}
	children = append(children, metadataChild(svc, existingSvc, r.services,
		func() bool { return serviceInSync(svc, existingSvc) },
		func() { correctService(svc, existingSvc); mergeLabels(svc, existingSvc) }))

	// Names the caches already show as someone else's stop the pass before any write. After a
	// conflict, the API server is asked too (the caches hold only the operator's own objects), so
	// a standing conflict does not create and roll back children on every pass.
	afterConflict := false
	if c := meta.FindStatusCondition(proxy.Status.Conditions, nexov1alpha1.ConditionReady); c != nil && c.Reason == nexov1alpha1.ReasonConflict {
		afterConflict = true
	}
	for _, c := range children {
		c.cached, c.found = c.from(client.ObjectKeyFromObject(c.desired))
		if !c.found && afterConflict {
			if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(c.desired), c.full); err == nil {
				c.found, c.cached = true, c.full
			} else if !apierrors.IsNotFound(err) {
				return nil, nil, err
			}
		}
		if c.found && !metav1.IsControlledBy(c.cached, proxy) {
			return nil, &blocked{reason: nexov1alpha1.ReasonConflict, message: conflictMessage(c.desired), wait: true}, nil
		}
	}
	// Creates first: a name someone else holds (which the caches cannot show) is found by its
	// create failing, before any child that exists is changed; the creates of this pass are
	// then removed again. Updates of existing children (the Deployment's move to the new
	// revision among them) come only once every child exists and is the proxy's.
	var created []client.Object
	for _, c := range children {
		if c.found {
			continue
		}
		id := childID{kindOf(c.desired), c.desired.GetName()}
		// Hashed as rendered: Create replaces desired with the API server's defaulted answer.
		content := render.ContentHash(c.desired)
		if err := controllerutil.SetControllerReference(proxy, c.desired, r.Scheme); err != nil {
			return nil, nil, err
		}
		err := r.Create(ctx, c.desired, FieldOwner)
		if err == nil {
			created = append(created, c.desired)
			c.cached, c.found = c.desired, true
			r.versions.set(proxyKey, id, childVersion{c.version(c.desired), content})
			continue
		}
		if !apierrors.IsAlreadyExists(err) {
			r.rollback(ctx, created)
			return nil, nil, &applyError{"create", c.desired, err}
		}
		// The cache had not seen it yet, or it is someone else's: ask the API server.
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(c.desired), c.full); err != nil {
			r.rollback(ctx, created)
			return nil, nil, err
		}
		c.cached, c.found = c.full, true
		if !metav1.IsControlledBy(c.full, proxy) {
			r.rollback(ctx, created)
			return nil, &blocked{reason: nexov1alpha1.ReasonConflict, message: conflictMessage(c.desired), wait: true}, nil
		}
	}
	for _, c := range children {
		if slices.Contains(created, c.desired) {
			continue
		}
		id := childID{kindOf(c.desired), c.desired.GetName()}
		content := render.ContentHash(c.desired)
		want := childVersion{version: c.version(c.cached), content: content}
		if r.versions.is(proxyKey, id, want) {
			continue // unchanged since the operator wrote or compared it
		}
		if c.cached != c.full {
			if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(c.desired), c.full); err != nil {
				return nil, nil, err
			}
			c.cached = c.full
		}
		if c.inSync() {
			r.versions.set(proxyKey, id, childVersion{c.version(c.full), content})
			continue
		}
		logf.FromContext(ctx).V(1).Info("correcting drifted child", "kind", id.kind, "name", id.name)
		c.correct()
		if err := r.Update(ctx, c.full, FieldOwner); err != nil {
			return nil, nil, &applyError{"update", c.desired, err}
		}
		r.versions.set(proxyKey, id, childVersion{c.version(c.full), content})
	}
	// Copies of pull Secrets that the profile no longer names go now (they are not in the pod
	// template any more); garbage collection would keep them for the proxy's lifetime.
	wanted := map[string]bool{}
	for _, src := range res.pullSecrets {
		wanted[src.Name] = true
	}
	if err := r.pruneCopies(ctx, proxy, func(source string) bool { return wanted[source] }); err != nil {
		return nil, nil, err
	}
	return slimcache.StateOf(depChild.cached), nil, nil
}

// pruneRevisions deletes the proxy's config ConfigMaps of revisions no ReplicaSet can use any
// more: it runs once a rollout has completed (every replica on status.graphRevision), and keeps
// that revision and status.previousRevision (the one old ReplicaSet the Deployment keeps,
// render.RevisionHistoryLimit). The unrevisioned ConfigMaps of 0.1.x go too. Each delete is
// conditional on the resourceVersion seen.
func (r *ProxyReconciler) pruneRevisions(ctx context.Context, proxy *nexov1alpha1.NexoProxy) error {
	keep := map[string]bool{proxy.Status.GraphRevision: true, proxy.Status.PreviousRevision: true}
	legacy := map[string]bool{proxy.Name + "-routing": true, proxy.Name + "-steps": true}
	for _, m := range r.configMaps.Owned(proxy.UID, func(m *slimcache.ChildMeta) bool {
		if m.Owner.Kind() != "NexoProxy" || m.Deleting {
			return false
		}
		rev := render.ConfigRevision(proxy.Name, m.Name)
		return rev != "" && !keep[rev] || legacy[m.Name]
	}) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: m.Namespace, Name: m.Name}}
		err := r.Delete(ctx, cm, client.Preconditions{ResourceVersion: &m.ResourceVersion})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return &applyError{"delete", cm, err}
		}
		logf.FromContext(ctx).V(1).Info("removed the config of an unused revision", "configMap", m.Name)
		r.versions.forgetChild(client.ObjectKeyFromObject(proxy), childID{"ConfigMap", m.Name})
	}
	return nil
}

// pruneCopies deletes the proxy's pull-Secret copies whose source keep rejects. Copies are found
// in the Secret cache by name (render.PullSecretName) and controller (this proxy); each delete
// is conditional on the resourceVersion seen, so a Secret that changed hands is never deleted.
func (r *ProxyReconciler) pruneCopies(ctx context.Context, proxy *nexov1alpha1.NexoProxy, keep func(source string) bool) error {
	prefix := render.PullSecretName(proxy.Name, "")
	for _, m := range r.secretMeta.Owned(proxy.UID, func(m *slimcache.ChildMeta) bool {
		return strings.HasPrefix(m.Name, prefix) && m.Owner.Kind() == "NexoProxy"
	}) {
		if keep(strings.TrimPrefix(m.Name, prefix)) {
			continue
		}
		rv := m.ResourceVersion
		stale := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: m.Namespace, Name: m.Name}}
		if err := r.Delete(ctx, stale, client.Preconditions{ResourceVersion: &rv}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return &applyError{"delete", stale, err}
		}
		logf.FromContext(ctx).Info("removed a pull-Secret copy its profile no longer names", "secret", m.Name)
		r.versions.forgetChild(client.ObjectKeyFromObject(proxy), childID{"Secret", m.Name})
	}
	return nil
}

// rollback deletes the children this pass created (they are the proxy's own, just made) after a
// conflict was found further on.
func (r *ProxyReconciler) rollback(ctx context.Context, created []client.Object) {
	for _, o := range created {
		uid := o.GetUID()
		if err := r.Delete(ctx, o, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
			logf.FromContext(ctx).Error(err, "cannot roll back a child after a conflict", "kind", kindOf(o), "name", o.GetName())
		}
	}
}

// applyError is an API error met while writing a child.
type applyError struct {
	verb string
	obj  client.Object
	err  error
}

func (e *applyError) Error() string {
	return fmt.Sprintf("cannot %s %s %s: %v", e.verb, kindOf(e.obj), e.obj.GetName(), e.err)
}

func (e *applyError) Unwrap() error { return e.err }

func kindOf(o client.Object) string {
	switch o.(type) {
	case *appsv1.Deployment:
		return "Deployment"
	case *corev1.Service:
		return "Service"
	case *corev1.ConfigMap:
		return "ConfigMap"
	case *corev1.Secret:
		return "Secret"
	}
	return fmt.Sprintf("%T", o)
}

func conflictMessage(o client.Object) string {
	return fmt.Sprintf("%s %s already exists and is not owned by this NexoProxy; it is left untouched: rename the proxy or remove that object", kindOf(o), o.GetName())
}

func labelsSubset(desired, existing client.Object) bool {
	have := existing.GetLabels()
	for k, v := range desired.GetLabels() {
		if have[k] != v {
			return false
		}
	}
	return true
}

func mergeLabels(desired, existing client.Object) {
	labels := maps.Clone(existing.GetLabels())
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, desired.GetLabels())
	existing.SetLabels(labels)
}

// deploymentInSync compares what the operator sets; fields the API server defaults are ignored
// (DeepDerivative), but list lengths must match so removed containers, volumes or ports count.
func deploymentInSync(desired, existing *appsv1.Deployment) bool {
	d, e := desired.Spec.Template.Spec, existing.Spec.Template.Spec
	if len(d.Containers) != len(e.Containers) || len(d.Volumes) != len(e.Volumes) || len(d.ImagePullSecrets) != len(e.ImagePullSecrets) {
		return false
	}
	for i := range d.Containers {
		if len(d.Containers[i].Ports) != len(e.Containers[i].Ports) || len(d.Containers[i].VolumeMounts) != len(e.Containers[i].VolumeMounts) {
			return false
		}
	}
	return labelsSubset(desired, existing) &&
		equality.Semantic.DeepDerivative(desired.Spec, existing.Spec) &&
		equality.Semantic.DeepEqual(desired.Spec.Template.Annotations, existing.Spec.Template.Annotations)
}

func serviceInSync(desired, existing *corev1.Service) bool {
	return labelsSubset(desired, existing) &&
		desired.Spec.Type == existing.Spec.Type &&
		len(desired.Spec.Ports) == len(existing.Spec.Ports) &&
		equality.Semantic.DeepEqual(desired.Spec.Selector, existing.Spec.Selector) &&
		equality.Semantic.DeepDerivative(portsKeepingAllocated(desired, existing), existing.Spec.Ports)
}

// portsKeepingAllocated returns the desired ports, where a port the operator does not pin keeps
// the node port the API server allocated to it. (DeepDerivative ignores unset strings and
// pointers, but not a zero nodePort.)
func portsKeepingAllocated(desired, existing *corev1.Service) []corev1.ServicePort {
	ports := make([]corev1.ServicePort, len(desired.Spec.Ports))
	copy(ports, desired.Spec.Ports)
	if desired.Spec.Type != corev1.ServiceTypeNodePort || existing.Spec.Type != corev1.ServiceTypeNodePort {
		return ports
	}
	for i := range ports {
		if ports[i].NodePort == 0 {
			for _, e := range existing.Spec.Ports {
				if e.Name == ports[i].Name {
					ports[i].NodePort = e.NodePort
				}
			}
		}
	}
	return ports
}

// correctService sets the fields the operator owns and leaves the allocated ones (clusterIP,
// node ports it does not pin).
func correctService(desired, existing *corev1.Service) {
	existing.Spec.Ports = portsKeepingAllocated(desired, existing)
	existing.Spec.Type = desired.Spec.Type
	existing.Spec.Selector = desired.Spec.Selector
	if desired.Spec.Type == corev1.ServiceTypeClusterIP {
		existing.Spec.ExternalTrafficPolicy = ""
	}
}
