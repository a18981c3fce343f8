package slimcache

import (
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// Store reads the entries one kind's informers keep (a ChildMeta, a DeploymentState), by name,
// from the informers' own stores: there is no second copy. An informer updates its store before
// it hands the event to handlers, so a reconcile queued by an event reads a state at least as
// new as that event.
type Store[T any] interface {
	// Get returns the entry of the object key names (shared with the informer: read-only).
	Get(key types.NamespacedName) (T, bool)
	// Owned returns the entries whose controller has the UID owner and that match, from the
	// owner index when the Store was made by ForOwned: a proxy finds its few children without
	// walking its namespace's thousands.
	Owned(owner types.UID, match func(T) bool) []T
}

// OwnerIndex indexes ChildMeta entries by their controller's UID (see ForOwned).
const OwnerIndex = "nexo.io/controller-uid"

func ownerIndex(obj any) ([]string, error) {
	if c, ok := obj.(*ChildMeta); ok && c.Owner.UID != "" {
		return []string{string(c.Owner.UID)}, nil
	}
	return nil, nil
}

// Registry remembers the informers a controller-runtime cache creates, by kind, so a Store can
// read their stores (controller-runtime's cache reader copies an entry into the type it was
// asked for, which a trimmed entry is not). With several watched namespaces the cache creates
// one informer per namespace and kind; a Store reads all of them.
//
// The informers of a kind a Store was made for are indexed for the Store, not for the cache
// reader: they get the owner index when the Store was made by ForOwned, and they lose the
// namespace index controller-runtime gives every informer. A Store reads by name and by owner,
// never by namespace, and that index costs a set entry per child of every proxy; a namespaced
// List of such a kind through the cache fails loudly ("Index with name namespace does not
// exist") instead of walking every entry.
//
// Set Registry.NewInformer as the cache's Options.NewInformer.
type Registry struct {
	Scheme *runtime.Scheme

	mu        sync.Mutex
	informers map[informerKey][]toolscache.SharedIndexInformer
	stores    map[informerKey]bool // kinds a Store reads; true: with the owner index (ForOwned)
}

type informerKey struct {
	gvk      schema.GroupVersionKind
	metadata bool // a metadata-only informer (PartialObjectMetadata)
}

// NewInformer creates the informer as controller-runtime would, and remembers it. The informers
// of a kind a Store was made for get that Store's indexes instead of the namespace index.
func (r *Registry) NewInformer(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
	gvk, err := apiutil.GVKForObject(obj, r.Scheme)
	if err != nil {
		return toolscache.NewSharedIndexInformer(lw, obj, resync, indexers)
	}
	_, metadata := obj.(*metav1.PartialObjectMetadata)
	k := informerKey{gvk, metadata}
	r.mu.Lock()
	defer r.mu.Unlock()
	if owned, ok := r.stores[k]; ok {
		keep := toolscache.Indexers{}
		for name, f := range indexers {
			if name != toolscache.NamespaceIndex {
				keep[name] = f
			}
		}
		if owned {
			keep[OwnerIndex] = ownerIndex
		}
		indexers = keep
	}
	inf := toolscache.NewSharedIndexInformer(lw, obj, resync, indexers)
	if r.informers == nil {
		r.informers = map[informerKey][]toolscache.SharedIndexInformer{}
	}
	r.informers[k] = append(r.informers[k], inf)
	return inf
}

// For is the Store of the informers of gvk (metadata: the metadata-only ones). Call it before
// the cache creates them (controllers' setup): an informer made earlier keeps the namespace
// index, and the Store reads it all the same.
func For[T any](r *Registry, gvk schema.GroupVersionKind, metadata bool) Store[T] {
	return forStore[T](r, informerKey{gvk, metadata}, false)
}

// ForOwned is For, and the kind's informers index their ChildMeta entries by controller UID, so
// Owned reads the index. An informer made before ForOwned has no owner index, and Owned then
// walks it in full.
func ForOwned[T any](r *Registry, gvk schema.GroupVersionKind, metadata bool) Store[T] {
	return forStore[T](r, informerKey{gvk, metadata}, true)
}

func forStore[T any](r *Registry, k informerKey, owned bool) Store[T] {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stores == nil {
		r.stores = map[informerKey]bool{}
	}
	r.stores[k] = r.stores[k] || owned
	return &store[T]{r: r, key: k}
}

type store[T any] struct {
	r   *Registry
	key informerKey
}

// informers are the kind's informers so far (appends never change the entries read).
func (s *store[T]) informers() []toolscache.SharedIndexInformer {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	return s.r.informers[s.key]
}

func (s *store[T]) Get(key types.NamespacedName) (T, bool) {
	k := key.Name
	if key.Namespace != "" {
		k = key.Namespace + "/" + key.Name
	}
	for _, inf := range s.informers() {
		if o, ok, _ := inf.GetIndexer().GetByKey(k); ok {
			if t, ok := o.(T); ok {
				return t, true
			}
		}
	}
	var zero T
	return zero, false
}

func (s *store[T]) Owned(owner types.UID, match func(T) bool) []T {
	var out []T
	for _, inf := range s.informers() {
		idx := inf.GetIndexer()
		var objs []any
		if _, indexed := idx.GetIndexers()[OwnerIndex]; indexed {
			objs, _ = idx.ByIndex(OwnerIndex, string(owner))
		} else {
			objs = idx.List()
		}
		for _, o := range objs {
			if t, ok := o.(T); ok && ownedBy(o, owner) && match(t) {
				out = append(out, t)
			}
		}
	}
	return out
}

// ownedBy tells whether a cache entry's controller has the UID owner.
func ownedBy(o any, owner types.UID) bool {
	c, ok := o.(*ChildMeta)
	return ok && c.Owner.UID == owner
}
