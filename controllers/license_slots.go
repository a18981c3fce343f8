package controllers

import (
	"context"
	"sort"
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
)

// licenseSlots answers "is this proxy within its license's maxProxies?" Proxies count in
// creation order (then by name), so the answer for every proxy of a license follows from one
// sorted list of the proxies referencing it. That list is computed once and kept as a cutoff
// (the last admitted proxy) until the set of proxies changes: every creation, deletion or
// licenseRef change bumps a generation counter, and a cutoff computed at an older generation is
// recomputed. Without it, every reconcile would list and copy all of a license's proxies.
type licenseSlots struct {
	// generation moves on every change of the set of proxies or of their licenseRefs.
	generation atomic.Uint64
	mu         sync.Mutex
	// byDocument is keyed by license document (NexoLicense status.documentID): every NexoLicense
	// holding the same document, in any namespace, shares its maxProxies.
	byDocument map[string]slotCutoff
}

// slotCutoff is the admission line of one license at one generation.
type slotCutoff struct {
	generation uint64
	maxProxies int32
	// last is the last admitted proxy in creation order; nil when every proxy fits.
	last *proxyOrder
}

// proxyOrder is a proxy's place in creation order; ties break by namespace, then name (the
// proxies of one license document may live in several namespaces).
type proxyOrder struct {
	created         int64 // unix seconds, the resolution of creationTimestamp
	namespace, name string
}

func orderOf(p *nexov1alpha1.NexoProxy) proxyOrder {
	return proxyOrder{created: p.CreationTimestamp.Unix(), namespace: p.Namespace, name: p.Name}
}

func (a proxyOrder) before(b proxyOrder) bool {
	if a.created != b.created {
		return a.created < b.created
	}
	if a.namespace != b.namespace {
		return a.namespace < b.namespace
	}
	return a.name < b.name
}

// watch bumps the generation on every change that can move an admission line. The handler runs
// after the informer's store has the change, and admitted reads the generation before it lists,
// so a cutoff is never kept for a generation newer than the list it came from.
func (s *licenseSlots) watch(ctx context.Context, c cache.Cache) error {
	// A proxy created, deleted or pointed at another license; a NexoLicense created, deleted or
	// holding another document.
	if err := bumpOn(ctx, s, c, &nexov1alpha1.NexoProxy{}, func(p *nexov1alpha1.NexoProxy) any { return p.Spec.LicenseRef }); err != nil {
		return err
	}
	return bumpOn(ctx, s, c, &nexov1alpha1.NexoLicense{}, func(l *nexov1alpha1.NexoLicense) any { return l.Status.DocumentID })
}

// bumpOn moves the generation on every creation and deletion of T, and on updates that change key.
func bumpOn[T client.Object](ctx context.Context, s *licenseSlots, c cache.Cache, obj T, key func(T) any) error {
	inf, err := c.GetInformer(ctx, obj)
	if err != nil {
		return err
	}
	bump := func(any) { s.generation.Add(1) }
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    bump,
		DeleteFunc: bump,
		UpdateFunc: func(oldObj, newObj any) {
			a, okA := oldObj.(T)
			b, okB := newObj.(T)
			if !okA || !okB || key(a) != key(b) {
				s.generation.Add(1)
			}
		},
	})
	return err
}

// indexLicenseDocument indexes NexoLicenses by the license document they hold.
const indexLicenseDocument = "status.documentID"

func licenseDocument(o client.Object) []string {
	if id := o.(*nexov1alpha1.NexoLicense).Status.DocumentID; id != "" {
		return []string{id}
	}
	return nil
}

// holders lists the NexoLicenses holding document doc ("" or none indexed yet: just lic).
func holders(ctx context.Context, r client.Reader, doc string, lic types.NamespacedName) ([]types.NamespacedName, error) {
	if doc == "" {
		return []types.NamespacedName{lic}, nil
	}
	var list nexov1alpha1.NexoLicenseList
	if err := r.List(ctx, &list, client.MatchingFields{indexLicenseDocument: doc}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	out := []types.NamespacedName{lic}
	for _, l := range list.Items {
		if key := (types.NamespacedName{Namespace: l.Namespace, Name: l.Name}); key != lic {
			out = append(out, key)
		}
	}
	return out, nil
}

// admitted reports whether proxy is within maxProxies of its license document doc (held by lic
// and possibly other NexoLicenses, in any watched namespace); when it is not, also the number of
// proxies that use the document and the proxy's 1-based position among them.
func (s *licenseSlots) admitted(ctx context.Context, r client.Reader, proxy *nexov1alpha1.NexoProxy, lic types.NamespacedName, doc string, maxProxies int32) (ok bool, count, position int, err error) {
	gen := s.generation.Load()
	me := orderOf(proxy)
	key := doc
	if key == "" {
		key = "license:" + lic.String()
	}
	s.mu.Lock()
	c, found := s.byDocument[key]
	s.mu.Unlock()
	if found && c.generation == gen && c.maxProxies == maxProxies && (c.last == nil || !c.last.before(me)) {
		return true, 0, 0, nil
	}
	licenses, err := holders(ctx, r, doc, lic)
	if err != nil {
		return false, 0, 0, err
	}
	var order []proxyOrder
	for _, l := range licenses {
		// A read-only view of the cached proxies: nothing below modifies them.
		var siblings nexov1alpha1.NexoProxyList
		if err := r.List(ctx, &siblings, client.InNamespace(l.Namespace), client.MatchingFields{indexProxyLicense: l.Name}, client.UnsafeDisableDeepCopy); err != nil {
			return false, 0, 0, err
		}
		for i := range siblings.Items {
			order = append(order, orderOf(&siblings.Items[i]))
		}
	}
	sort.Slice(order, func(i, j int) bool { return order[i].before(order[j]) })
	if maxProxies >= 1 { // a valid license covers at least one proxy; otherwise nothing is kept
		c = slotCutoff{generation: gen, maxProxies: maxProxies}
		if len(order) > int(maxProxies) {
			last := order[maxProxies-1] // a copy: the cutoff must not keep the whole list alive
			c.last = &last
		}
		s.mu.Lock()
		if s.byDocument == nil {
			s.byDocument = map[string]slotCutoff{}
		}
		s.byDocument[key] = c
		s.mu.Unlock()
	}
	pos := sort.Search(len(order), func(i int) bool { return !order[i].before(me) })
	if pos < int(maxProxies) {
		return true, 0, 0, nil
	}
	return false, len(order), pos + 1, nil
}
