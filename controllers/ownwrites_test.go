package controllers

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// A pass finds the version its previous write replaced once, and entries go after one to two
// TTLs whether or not they were taken.
func TestOwnWritesAreTakenOnceAndExpire(t *testing.T) {
	var w ownWrites
	a, b := types.NamespacedName{Namespace: "n", Name: "a"}, types.NamespacedName{Namespace: "n", Name: "b"}
	t0 := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	w.wrote(a, "10", t0)
	w.wrote(a, "11", t0.Add(time.Second)) // the later write replaced 11
	if rv, ok := w.take(a, t0.Add(2*time.Second)); !ok || rv != "11" {
		t.Errorf("take(a) = %q, %v; want 11", rv, ok)
	}
	if _, ok := w.take(a, t0.Add(2*time.Second)); ok {
		t.Error("take(a) found an entry twice")
	}

	w.wrote(b, "20", t0.Add(3*time.Second))
	// One rotation later the entry is still there (previous generation)...
	if rv, ok := w.take(b, t0.Add(3*time.Second+ownWritesTTL)); !ok || rv != "20" {
		t.Errorf("take(b) after one TTL = %q, %v; want 20", rv, ok)
	}
	// ...two rotations later it is gone.
	w.wrote(b, "21", t0.Add(4*time.Second+ownWritesTTL))
	w.wrote(a, "12", t0.Add(4*time.Second+2*ownWritesTTL))
	w.wrote(a, "13", t0.Add(4*time.Second+3*ownWritesTTL))
	if _, ok := w.take(b, t0.Add(4*time.Second+3*ownWritesTTL)); ok {
		t.Error("take(b) found an entry written three TTLs ago")
	}
	if len(w.cur)+len(w.prev) != 1 {
		t.Errorf("%d entries kept, want 1", len(w.cur)+len(w.prev))
	}
}
