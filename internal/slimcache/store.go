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
	// List returns the entries of namespace that match (shared with the informer: read-only).
	List(namespace string, match func(T) bool) []T
}

// Registry remembers the informers a controller-runtime cache creates, by kind, so a Store can
// read their stores (controller-runtime's cache reader copies an entry into the type it was
// asked for, which a trimmed entry is not). With several watched namespaces the cache creates
// one informer per namespace and kind; a Store reads all of them.
//
// Set Registry.NewInformer as the cache's Options.NewInformer.
type Registry struct {
	Scheme *runtime.Scheme

	mu        sync.Mutex
	informers map[informerKey][]toolscache.SharedIndexInformer
}

type informerKey struct {
	gvk      schema.GroupVersionKind
	metadata bool // a metadata-only informer (PartialObjectMetadata)
}

// NewInformer creates the informer as controller-runtime would, and remembers it.
func (r *Registry) NewInformer(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
	inf := toolscache.NewSharedIndexInformer(lw, obj, resync, indexers)
	if gvk, err := apiutil.GVKForObject(obj, r.Scheme); err == nil {
		_, metadata := obj.(*metav1.PartialObjectMetadata)
		r.mu.Lock()
		if r.informers == nil {
			r.informers = map[informerKey][]toolscache.SharedIndexInformer{}
		}
		k := informerKey{gvk, metadata}
		r.informers[k] = append(r.informers[k], inf)
		r.mu.Unlock()
	}
	return inf
}

// For is the Store of the informers of gvk (metadata: the metadata-only ones). It may be called
// before the cache creates them.
func For[T any](r *Registry, gvk schema.GroupVersionKind, metadata bool) Store[T] {
	return &store[T]{r: r, key: informerKey{gvk, metadata}}
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

func (s *store[T]) List(namespace string, match func(T) bool) []T {
	var out []T
	for _, inf := range s.informers() {
		objs, err := inf.GetIndexer().ByIndex(toolscache.NamespaceIndex, namespace)
		if err != nil {
			continue
		}
		for _, o := range objs {
			if t, ok := o.(T); ok && match(t) {
				out = append(out, t)
			}
		}
	}
	return out
}
