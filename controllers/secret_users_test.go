package controllers

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// A Secret event queues exactly the proxies whose last resolution read that Secret, and a
// Secret's cached content is dropped once no proxy reads it.
func TestSecretUsers(t *testing.T) {
	var s secretUsers
	nn := func(ns, name string) types.NamespacedName { return types.NamespacedName{Namespace: ns, Name: name} }
	users := func(ns, name string) map[types.NamespacedName]bool {
		out := map[types.NamespacedName]bool{}
		for _, r := range s.proxiesFor(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}) {
			out[r.NamespacedName] = true
		}
		return out
	}
	a, b := nn("ns", "a"), nn("ns", "b")
	lic, tls, pull := nn("ns", "license"), nn("ns", "a-tls"), nn("nexo-system", "registry")
	s.set(a, []types.NamespacedName{lic, tls, pull})
	s.set(b, []types.NamespacedName{lic, pull})
	s.store(tls, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "7"}})
	s.store(lic, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "3"}})

	if got := users("ns", "license"); len(got) != 2 || !got[a] || !got[b] {
		t.Errorf("license users %v", got)
	}
	if got := users("ns", "a-tls"); len(got) != 1 || !got[a] {
		t.Errorf("tls users %v", got)
	}
	if got := users("nexo-system", "license"); len(got) != 0 {
		t.Errorf("a same-name Secret in another namespace has users %v", got)
	}
	if s.content(tls, "7") == nil || s.content(tls, "8") != nil {
		t.Error("content is not keyed by resourceVersion")
	}

	// a stops reading its TLS Secret: its content goes; the license is still read by both.
	s.set(a, []types.NamespacedName{lic, pull})
	if s.content(tls, "7") != nil || len(users("ns", "a-tls")) != 0 {
		t.Error("an unread Secret is still remembered")
	}
	s.set(a, nil)
	if s.content(lic, "3") == nil {
		t.Error("the license content went while b still reads it")
	}
	s.set(b, nil)
	if s.content(lic, "3") != nil || len(users("ns", "license")) != 0 || len(s.byProxy) != 0 {
		t.Error("deleted proxies are still remembered")
	}
}
