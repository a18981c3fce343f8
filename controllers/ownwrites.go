package controllers

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// ownWrites remembers, for a short while, the resourceVersion that each status write of the
// proxy controller replaced. A pass queued right after the write (a Deployment becoming
// available while the previous pass was still writing, say) can then tell that the cache has not
// yet seen that write, and wait the few milliseconds the watch takes, instead of computing from
// the older object and meeting a Conflict (a failed write and one more reconcile). These are the
// "expectations" of Kubernetes' own controllers, for our own writes; Cluster API waits for its
// cache the same way after creating Machines.
//
// Entries are kept in two generations that rotate every ownWritesTTL, so the memory is what was
// written in the last minute or less, not an entry per proxy for ever.
type ownWrites struct {
	mu        sync.Mutex
	cur, prev map[types.NamespacedName]string
	rotated   time.Time
}

// ownWritesTTL is how long an entry is kept at least (and at most twice that): far longer than
// a watch takes to deliver a write, even on a loaded API server.
const ownWritesTTL = 30 * time.Second

// cacheWait bounds how long a pass waits for the cache to show its previous write; past it the
// pass goes on, and the optimistic lock of writeStatus still refuses a stale write.
const cacheWait = 2 * time.Second

// wrote records that a write of key replaced the object at resourceVersion replaced.
func (w *ownWrites) wrote(key types.NamespacedName, replaced string, now time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.rotate(now)
	w.cur[key] = replaced
	delete(w.prev, key)
}

// take returns, and forgets, the resourceVersion the last recorded write of key replaced.
func (w *ownWrites) take(key types.NamespacedName, now time.Time) (string, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.rotate(now)
	rv, ok := w.cur[key]
	if !ok {
		rv, ok = w.prev[key]
	}
	delete(w.cur, key)
	delete(w.prev, key)
	return rv, ok
}

func (w *ownWrites) rotate(now time.Time) {
	if w.cur == nil || now.Sub(w.rotated) >= ownWritesTTL {
		w.prev, w.cur, w.rotated = w.cur, map[types.NamespacedName]string{}, now
	}
}

// awaitOwnWrite re-reads obj from the cache until it is no longer at the resourceVersion the
// controller's last write of it replaced (at most cacheWait). It reads nothing when the cache
// already shows a newer version, which is almost always.
func (r *ProxyReconciler) awaitOwnWrite(ctx context.Context, key types.NamespacedName, obj client.Object) error {
	replaced, ok := r.writes.take(key, time.Now())
	if !ok || obj.GetResourceVersion() != replaced {
		return nil
	}
	err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, cacheWait, false, func(ctx context.Context) (bool, error) {
		if err := r.Get(ctx, key, obj); err != nil {
			return false, err
		}
		return obj.GetResourceVersion() != replaced, nil
	})
	if wait.Interrupted(err) {
		logf.FromContext(ctx).V(1).Info("the cache has not shown the last status write yet; going on", "waited", cacheWait)
		return nil
	}
	return err
}
