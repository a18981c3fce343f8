package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// child is one generated object: its kind's entry in render.Children, what we want, and what
// the cache shows.
//
// The caches hold children trimmed to their metadata (Deployments as a DeploymentState; see
// controllers/slimcache). A child is in sync without any read when its version (generation
// and labels for the Deployment, whose status moves all the time; resourceVersion otherwise) is
// the one at which the operator last wrote it or compared it in full, and the desired content is
// the same as then (ChildKind.ContentHash). Otherwise the whole object is read from the API
// server, compared, and corrected if it drifted.
type child struct {
	kind    render.ChildKind
	desired client.Object
	// cached is the cache's state of the child (ChildMeta, DeploymentState) or the whole object
	// once read or written; full receives the whole object when read.
	cached, full client.Object
	found        bool
}

// apply creates or corrects the proxy's children. A converged proxy costs no API call and a new
// one costs only its creates. A name held by someone else is a Conflict: nothing is overwritten,
// and children this pass created are removed again, so a conflict leaves nothing half-applied.
func (r *ProxyReconciler) apply(ctx context.Context, proxy *nexov1alpha1.NexoProxy, res *resolved, configHash, revision string) (*slimcache.DeploymentState, *blocked, error) {
	proxyKey := client.ObjectKeyFromObject(proxy)
	in := render.Inputs{ConfigHash: configHash, Revision: revision, PullSecrets: res.pullSecrets}
	var children []*child
	var workload *child
	for _, k := range render.Children {
		for _, desired := range k.Render(res.graph, in) {
			c := &child{kind: k, desired: desired, full: k.New()}
			children = append(children, c)
			if k.Cache == render.CacheDeploymentState {
				workload = c
			}
		}
	}

	// Names the caches already show as someone else's stop the pass before any write. After a
	// conflict, the API server is asked too (the caches hold only the operator's own objects), so
	// a standing conflict does not create and roll back children on every pass.
	afterConflict := false
	if c := meta.FindStatusCondition(proxy.Status.Conditions, nexov1alpha1.ConditionReady); c != nil && c.Reason == nexov1alpha1.ReasonConflict {
		afterConflict = true
	}
	for _, c := range children {
		c.cached, c.found = r.children.get(c.kind, client.ObjectKeyFromObject(c.desired))
		if !c.found && afterConflict {
			if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(c.desired), c.full); err == nil {
				c.found, c.cached = true, c.full
			} else if !apierrors.IsNotFound(err) {
				return nil, nil, err
			}
		}
		if c.found && !metav1.IsControlledBy(c.cached, proxy) {
			return nil, &blocked{reason: nexov1alpha1.ReasonConflict, message: conflictMessage(c), wait: true}, nil
		}
	}
	// Creates first: a name someone else holds (which the caches cannot show) is found by its
	// create failing, before any child that exists is changed; the creates of this pass are
	// then removed again. Updates of existing children (the Deployment's move to the new
	// revision among them) come only once every child exists and is the proxy's.
	var created []*child
	for _, c := range children {
		if c.found {
			continue
		}
		id := childID{c.kind.Kind(), c.desired.GetName()}
		// Hashed as rendered: Create replaces desired with the API server's defaulted answer.
		content := c.kind.ContentHash(c.desired)
		if err := controllerutil.SetControllerReference(proxy, c.desired, r.Scheme); err != nil {
			return nil, nil, err
		}
		err := r.Create(ctx, c.desired, FieldOwner)
		if err == nil {
			created = append(created, c)
			c.cached, c.found = c.desired, true
			r.versions.set(proxyKey, id, childVersion{versionOf(c.kind, c.desired), content})
			continue
		}
		if !apierrors.IsAlreadyExists(err) {
			r.rollback(ctx, created)
			return nil, nil, &applyError{"create", c.kind.Kind(), c.desired.GetName(), err}
		}
		// The cache had not seen it yet, or it is someone else's: ask the API server.
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(c.desired), c.full); err != nil {
			r.rollback(ctx, created)
			return nil, nil, err
		}
		c.cached, c.found = c.full, true
		if !metav1.IsControlledBy(c.full, proxy) {
			r.rollback(ctx, created)
			return nil, &blocked{reason: nexov1alpha1.ReasonConflict, message: conflictMessage(c), wait: true}, nil
		}
	}
	for _, c := range children {
		if slices.Contains(created, c) {
			continue
		}
		id := childID{c.kind.Kind(), c.desired.GetName()}
		content := c.kind.ContentHash(c.desired)
		want := childVersion{version: versionOf(c.kind, c.cached), content: content}
		if r.versions.is(proxyKey, id, want) {
			continue // unchanged since the operator wrote or compared it
		}
		if c.cached != c.full {
			if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(c.desired), c.full); err != nil {
				return nil, nil, err
			}
			c.cached = c.full
		}
		if c.kind.InSync(c.desired, c.full) {
			r.versions.set(proxyKey, id, childVersion{versionOf(c.kind, c.full), content})
			continue
		}
		logf.FromContext(ctx).V(1).Info("correcting drifted child", "kind", id.kind, "name", id.name)
		c.kind.Correct(c.desired, c.full)
		if err := r.Update(ctx, c.full, FieldOwner); err != nil {
			return nil, nil, &applyError{"update", c.kind.Kind(), c.desired.GetName(), err}
		}
		r.versions.set(proxyKey, id, childVersion{versionOf(c.kind, c.full), content})
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
	return slimcache.StateOf(workload.cached), nil, nil
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
			return &applyError{"delete", "ConfigMap", cm.Name, err}
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
			return &applyError{"delete", "Secret", stale.Name, err}
		}
		logf.FromContext(ctx).Info("removed a pull-Secret copy its profile no longer names", "secret", m.Name)
		r.versions.forgetChild(client.ObjectKeyFromObject(proxy), childID{"Secret", m.Name})
	}
	return nil
}

// rollback deletes the children this pass created (they are the proxy's own, just made) after a
// conflict was found further on.
func (r *ProxyReconciler) rollback(ctx context.Context, created []*child) {
	for _, c := range created {
		uid := c.desired.GetUID()
		if err := r.Delete(ctx, c.desired, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
			logf.FromContext(ctx).Error(err, "cannot roll back a child after a conflict", "kind", c.kind.Kind(), "name", c.desired.GetName())
		}
	}
}

// applyError is an API error met while writing a child.
type applyError struct {
	verb, kind, name string
	err              error
}

func (e *applyError) Error() string {
	return fmt.Sprintf("cannot %s %s %s: %v", e.verb, e.kind, e.name, e.err)
}

func (e *applyError) Unwrap() error { return e.err }

func conflictMessage(c *child) string {
	return fmt.Sprintf("%s %s already exists and is not owned by this NexoProxy; it is left untouched: rename the proxy or remove that object", c.kind.Kind(), c.desired.GetName())
}
