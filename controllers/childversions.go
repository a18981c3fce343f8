package controllers

import (
	"hash/maphash"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/nexo-io/nexo-edge/controllers/render"
)

// childID names one child of a proxy (kind is the kind of its render.Children entry).
type childID struct{ kind, name string }

// childVersion is what the operator knows of a child: at this version (generation or
// resourceVersion) it held the content with this hash (render.ChildKind.ContentHash).
type childVersion struct {
	version string
	content render.Hash
}

// childVersions remembers, per proxy and child, the version at which the operator last wrote the
// child or compared it in full, and the hash of the content it had then. It starts empty, so
// after a restart each child is read once in full before the cache alone is trusted.
//
// It holds an entry for every child of every proxy, so an entry is kept small (32 bytes, no
// strings of its own): a proxy's few children are a slice of exactly their number, not a map,
// and the child's name and its version are kept as 64-bit hashes. Both are only compared for
// equality within one proxy; two children or two versions of one child colliding is a 2^-64
// chance, and would cost at worst one missed drift check until the child's next change.
type childVersions struct {
	mu      sync.Mutex
	byProxy map[types.NamespacedName][]childEntry
}

type childEntry struct {
	id      uint64 // hashID
	version uint64 // hashVersion
	content render.Hash
}

// childSeed seeds the hashes; they live only in this process.
var childSeed = maphash.MakeSeed()

func hashID(id childID) uint64 { return maphash.Comparable(childSeed, id) }

func hashVersion(v string) uint64 { return maphash.String(childSeed, v) }

func (v *childVersions) is(proxy types.NamespacedName, id childID, want childVersion) bool {
	w := childEntry{id: hashID(id), version: hashVersion(want.version), content: want.content}
	v.mu.Lock()
	defer v.mu.Unlock()
	for _, e := range v.byProxy[proxy] {
		if e.id == w.id {
			return e == w
		}
	}
	return false
}

func (v *childVersions) set(proxy types.NamespacedName, id childID, cv childVersion) {
	e := childEntry{id: hashID(id), version: hashVersion(cv.version), content: cv.content}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.byProxy == nil {
		v.byProxy = map[types.NamespacedName][]childEntry{}
	}
	entries := v.byProxy[proxy]
	for i := range entries {
		if entries[i].id == e.id {
			entries[i] = e
			return
		}
	}
	// One more entry, in a slice of exactly the new length: append would double the capacity,
	// and these slices are never long (a proxy's children) but there is one per proxy.
	grown := make([]childEntry, len(entries)+1)
	copy(grown, entries)
	grown[len(entries)] = e
	v.byProxy[proxy] = grown
}

func (v *childVersions) forgetChild(proxy types.NamespacedName, id childID) {
	h := hashID(id)
	v.mu.Lock()
	defer v.mu.Unlock()
	entries := v.byProxy[proxy]
	for i := range entries {
		if entries[i].id == h {
			v.byProxy[proxy] = append(entries[:i:i], entries[i+1:]...)
			return
		}
	}
}

func (v *childVersions) forget(proxy types.NamespacedName) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.byProxy, proxy)
}
