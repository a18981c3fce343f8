package controllers

import (
	"context"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// secretUsers remembers which Secrets each proxy's last resolution read, so a Secret change
// re-queues exactly those proxies. Secret references are spread over many kinds (TLS, CAs,
// credentials, salts, pull secrets), so this is kept from resolution rather than indexed.
// It also holds the content of those Secrets, keyed by resourceVersion, and drops a Secret's
// content once no proxy references it.
//
// Only the proxy-to-Secrets lists are kept (a few names per proxy); the Secrets-to-proxies
// direction is a scan of them on a Secret event, which is rare next to the memory a reverse map
// would keep for every proxy.
type secretUsers struct {
	mu       sync.Mutex
	byProxy  map[types.NamespacedName][]types.NamespacedName
	contents map[types.NamespacedName]*corev1.Secret
}

// content returns the cached Secret if it is at resourceVersion rv.
func (s *secretUsers) content(key types.NamespacedName, rv string) *corev1.Secret {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.contents[key]; c != nil && c.ResourceVersion == rv {
		return c
	}
	return nil
}

func (s *secretUsers) store(key types.NamespacedName, secret *corev1.Secret) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.contents == nil {
		s.contents = map[types.NamespacedName]*corev1.Secret{}
	}
	s.contents[key] = secret
}

// set records the Secrets the proxy's resolution read (nil: the proxy is gone).
func (s *secretUsers) set(proxy types.NamespacedName, secrets []types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.byProxy == nil {
		s.byProxy = map[types.NamespacedName][]types.NamespacedName{}
	}
	old := s.byProxy[proxy]
	if slices.Equal(old, secrets) {
		return
	}
	if len(secrets) == 0 {
		delete(s.byProxy, proxy)
	} else {
		s.byProxy[proxy] = slices.Clone(secrets) // exactly its length: resolution appends
	}
	for _, sec := range old {
		if !slices.Contains(secrets, sec) && !s.usedLocked(sec) { // nobody reads it any more
			delete(s.contents, sec)
		}
	}
}

func (s *secretUsers) usedLocked(secret types.NamespacedName) bool {
	for _, secrets := range s.byProxy {
		if slices.Contains(secrets, secret) {
			return true
		}
	}
	return false
}

func (s *secretUsers) proxiesFor(_ context.Context, secret client.Object) []reconcile.Request {
	key := types.NamespacedName{Namespace: secret.GetNamespace(), Name: secret.GetName()}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []reconcile.Request
	for p, secrets := range s.byProxy {
		if slices.Contains(secrets, key) {
			out = append(out, reconcile.Request{NamespacedName: p})
		}
	}
	return out
}
