package controllers

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
)

// ChildMeta is what the operator keeps of each generated child and each Secret in its caches:
// name, namespace, resourceVersion, generation, whether it is being deleted, and its controller
// reference. A metav1.PartialObjectMetadata is 288 bytes before any of its strings and an owner
// reference slice; a ChildMeta is 144, and the caches hold several per proxy.
//
// It is a client.Object so informers, predicates and owner handlers take it as they are; it is
// a read-only cache entry, so the setters of fields it does not keep do nothing.
type ChildMeta struct {
	Name, Namespace, ResourceVersion string
	Generation                       int64
	Deleting                         bool
	Owner                            ControllerRef
}

// ControllerRef is a controller owner reference (zero: none).
type ControllerRef struct {
	APIVersion, Kind, Name string
	UID                    types.UID
}

// metaOf keeps what ChildMeta holds of an object's metadata; repeated strings are interned.
func metaOf(m metav1.Object) ChildMeta {
	c := ChildMeta{Name: m.GetName(), Namespace: intern(m.GetNamespace()), ResourceVersion: m.GetResourceVersion(),
		Generation: m.GetGeneration(), Deleting: m.GetDeletionTimestamp() != nil}
	if ref := metav1.GetControllerOfNoCopy(m); ref != nil {
		c.Owner = ControllerRef{APIVersion: intern(ref.APIVersion), Kind: intern(ref.Kind), Name: ref.Name, UID: ref.UID}
	}
	return c
}

// childMetaOf is the ChildMeta of any object (the cache's pass through).
func childMetaOf(o client.Object) (*ChildMeta, bool) {
	if c, ok := o.(*ChildMeta); ok {
		return c, true
	}
	c := metaOf(o)
	return &c, true
}

func (c *ChildMeta) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }
func (c *ChildMeta) DeepCopyObject() runtime.Object   { out := *c; return &out }

func (c *ChildMeta) GetNamespace() string                          { return c.Namespace }
func (c *ChildMeta) SetNamespace(ns string)                        { c.Namespace = ns }
func (c *ChildMeta) GetName() string                               { return c.Name }
func (c *ChildMeta) SetName(name string)                           { c.Name = name }
func (c *ChildMeta) GetGenerateName() string                       { return "" }
func (c *ChildMeta) SetGenerateName(string)                        {}
func (c *ChildMeta) GetUID() types.UID                             { return "" }
func (c *ChildMeta) SetUID(types.UID)                              {}
func (c *ChildMeta) GetResourceVersion() string                    { return c.ResourceVersion }
func (c *ChildMeta) SetResourceVersion(v string)                   { c.ResourceVersion = v }
func (c *ChildMeta) GetGeneration() int64                          { return c.Generation }
func (c *ChildMeta) SetGeneration(g int64)                         { c.Generation = g }
func (c *ChildMeta) GetSelfLink() string                           { return "" }
func (c *ChildMeta) SetSelfLink(string)                            {}
func (c *ChildMeta) GetCreationTimestamp() metav1.Time             { return metav1.Time{} }
func (c *ChildMeta) SetCreationTimestamp(metav1.Time)              {}
func (c *ChildMeta) GetDeletionGracePeriodSeconds() *int64         { return nil }
func (c *ChildMeta) SetDeletionGracePeriodSeconds(*int64)          {}
func (c *ChildMeta) GetLabels() map[string]string                  { return nil }
func (c *ChildMeta) SetLabels(map[string]string)                   {}
func (c *ChildMeta) GetAnnotations() map[string]string             { return nil }
func (c *ChildMeta) SetAnnotations(map[string]string)              {}
func (c *ChildMeta) GetFinalizers() []string                       { return nil }
func (c *ChildMeta) SetFinalizers([]string)                        {}
func (c *ChildMeta) GetManagedFields() []metav1.ManagedFieldsEntry { return nil }
func (c *ChildMeta) SetManagedFields([]metav1.ManagedFieldsEntry)  {}

// GetDeletionTimestamp is a non-nil (zero) time when the object is being deleted.
func (c *ChildMeta) GetDeletionTimestamp() *metav1.Time {
	if c.Deleting {
		return &metav1.Time{}
	}
	return nil
}

func (c *ChildMeta) SetDeletionTimestamp(t *metav1.Time) { c.Deleting = t != nil }

// GetOwnerReferences is the controller reference, if any (the only one kept).
func (c *ChildMeta) GetOwnerReferences() []metav1.OwnerReference {
	if c.Owner == (ControllerRef{}) {
		return nil
	}
	controller := true
	return []metav1.OwnerReference{{APIVersion: c.Owner.APIVersion, Kind: c.Owner.Kind, Name: c.Owner.Name, UID: c.Owner.UID, Controller: &controller}}
}

// SetOwnerReferences keeps the controller reference among refs.
func (c *ChildMeta) SetOwnerReferences(refs []metav1.OwnerReference) {
	c.Owner = ControllerRef{}
	for _, r := range refs {
		if r.Controller != nil && *r.Controller {
			c.Owner = ControllerRef{APIVersion: r.APIVersion, Kind: r.Kind, Name: r.Name, UID: r.UID}
		}
	}
}

// metadataOf is the object a metadata-only informer of a core/v1 kind is asked for by.
func metadataOf(kind string) *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind(kind))
	return m
}

// stateStore holds the latest state of every object one informer shows, by name. It is fed by
// a recordingHandler, which records an event before it queues anything, so a reconcile queued by
// an event always reads a state at least as new as that event.
type stateStore[T client.Object] struct {
	mu     sync.RWMutex
	byName map[types.NamespacedName]T
	// of turns what the informer delivers into T (a cache transform already did; this also
	// serves objects read from the API server).
	of func(client.Object) (T, bool)
}

// get returns the object's state (shared with the informer: read-only).
func (s *stateStore[T]) get(key types.NamespacedName) (T, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	v, ok := s.byName[key]
	return v, ok
}

// list returns the states that match (shared with the informer: read-only).
func (s *stateStore[T]) list(match func(T) bool) []T {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []T
	for _, v := range s.byName {
		if match(v) {
			out = append(out, v)
		}
	}
	return out
}

func (s *stateStore[T]) put(o client.Object) {
	v, ok := s.of(o)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byName == nil {
		s.byName = map[types.NamespacedName]T{}
	}
	s.byName[types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}] = v
}

func (s *stateStore[T]) remove(o client.Object) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byName, types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()})
}

// recordingHandler records every event of one informer in a stateStore, then hands it to
// handlers, each behind its predicate (nil: all events).
type recordingHandler[T client.Object] struct {
	store *stateStore[T]
	then  []filtered
}

type filtered struct {
	pred predicate.Predicate
	h    handler.EventHandler
}

func (h recordingHandler[T]) Create(ctx context.Context, e event.CreateEvent, q queue) {
	h.store.put(e.Object)
	for _, f := range h.then {
		if f.pred == nil || f.pred.Create(e) {
			f.h.Create(ctx, e, q)
		}
	}
}

func (h recordingHandler[T]) Update(ctx context.Context, e event.UpdateEvent, q queue) {
	h.store.put(e.ObjectNew)
	for _, f := range h.then {
		if f.pred == nil || f.pred.Update(e) {
			f.h.Update(ctx, e, q)
		}
	}
}

func (h recordingHandler[T]) Delete(ctx context.Context, e event.DeleteEvent, q queue) {
	h.store.remove(e.Object)
	for _, f := range h.then {
		if f.pred == nil || f.pred.Delete(e) {
			f.h.Delete(ctx, e, q)
		}
	}
}

func (h recordingHandler[T]) Generic(ctx context.Context, e event.GenericEvent, q queue) {
	for _, f := range h.then {
		if f.pred == nil || f.pred.Generic(e) {
			f.h.Generic(ctx, e, q)
		}
	}
}
