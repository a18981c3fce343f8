package manager

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/contract/protocol"
	"github.com/nexo-io/nexo-edge/contract/wire"
)

// proxyInventory is what the Manager reports of its own NexoProxies. It follows them through an
// informer whose cache keeps only a proxy's namespace, name and the status fields a heartbeat
// carries (trimProxy), and keeps two inventories: current (what the cluster holds) and confirmed
// (what the Control Plane last confirmed holding), each with its protocol.Digest. Events mark
// proxies dirty; a heartbeat sends only the dirty ones that differ, so its size and the work to
// build it do not grow with unchanged proxies. Locking: mu guards every field.
type proxyInventory struct {
	mu              sync.Mutex
	owner           string
	current         map[protocol.ObjectRef]protocol.Deployment
	digest          protocol.Digest
	confirmed       map[protocol.ObjectRef]protocol.Deployment
	confirmedDigest protocol.Digest
	dirty           map[protocol.ObjectRef]struct{}
	// fullLists: the Control Plane answered a delta heartbeat without an inventory digest (it
	// predates inventory.delta), so heartbeats carry every proxy in Deployments again.
	fullLists bool
	// withStatus: the Control Plane announced CapProxyStatus, so entries carry each proxy's
	// phase, Ready reason and available revision. Until then they are left out.
	withStatus bool
	// cached lists the cached proxies, to rebuild every entry when withStatus turns on.
	cached func() []*nexov1alpha1.NexoProxy
}

// inventorySyncTimeout bounds the wait for the informer's first list.
const inventorySyncTimeout = 2 * time.Minute

// startInventory starts the informer once, for the owner id in use: its cache lives as long as
// the process (a Manager that loses and regains its Lease keeps it).
func (a *Agent) startInventory(ctx context.Context) (*proxyInventory, error) {
	a.invMu.Lock()
	defer a.invMu.Unlock()
	owner := a.OwnerID()
	if a.inv != nil {
		if a.inv.owner != owner {
			return nil, fmt.Errorf("the owner id changed from %s to %s (a connect token of another environment?): restart the Manager", a.inv.owner, owner)
		}
		return a.inv, nil
	}
	if a.cfg.RESTConfig == nil {
		return nil, fmt.Errorf("no REST config to watch NexoProxies with")
	}
	opts := cache.Options{Scheme: a.client.Scheme(), ByObject: map[client.Object]cache.ByObject{
		&nexov1alpha1.NexoProxy{}: {Label: labels.SelectorFromSet(labels.Set{wire.OwnerLabel: owner}), Transform: trimProxy},
	}}
	if len(a.cfg.WatchNamespaces) > 0 {
		opts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range a.cfg.WatchNamespaces {
			opts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	c, err := cache.New(a.cfg.RESTConfig, opts)
	if err != nil {
		return nil, err
	}
	inv := &proxyInventory{owner: owner, current: map[protocol.ObjectRef]protocol.Deployment{},
		confirmed: map[protocol.ObjectRef]protocol.Deployment{}, dirty: map[protocol.ObjectRef]struct{}{}}
	informer, err := c.GetInformer(ctx, &nexov1alpha1.NexoProxy{})
	if err != nil {
		return nil, err
	}
	reg, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { inv.set(obj) },
		UpdateFunc: func(_, obj any) { inv.set(obj) },
		DeleteFunc: func(obj any) { inv.remove(obj) },
	})
	if err != nil {
		return nil, err
	}
	go func() { _ = c.Start(context.WithoutCancel(ctx)) }()
	syncCtx, cancel := context.WithTimeout(ctx, inventorySyncTimeout)
	defer cancel()
	if !toolscache.WaitForCacheSync(syncCtx.Done(), reg.HasSynced) {
		return nil, fmt.Errorf("the NexoProxy informer did not sync within %s", inventorySyncTimeout)
	}
	inv.cached = func() []*nexov1alpha1.NexoProxy {
		var list nexov1alpha1.NexoProxyList
		if err := c.List(context.Background(), &list); err != nil {
			return nil
		}
		out := make([]*nexov1alpha1.NexoProxy, len(list.Items))
		for i := range list.Items {
			out[i] = &list.Items[i]
		}
		return out
	}
	a.inv = inv
	return inv, nil
}

// trimProxy keeps what a heartbeat reports of a NexoProxy, and what an informer needs.
func trimProxy(obj any) (any, error) {
	p, ok := obj.(*nexov1alpha1.NexoProxy)
	if !ok {
		return obj, nil // a tombstone
	}
	t := &nexov1alpha1.NexoProxy{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, ResourceVersion: p.ResourceVersion},
		Status: nexov1alpha1.NexoProxyStatus{Replicas: p.Status.Replicas, ReadyReplicas: p.Status.ReadyReplicas, GraphRevision: p.Status.GraphRevision,
			Phase: p.Status.Phase, AvailableRevision: p.Status.AvailableRevision},
	}
	if c := meta.FindStatusCondition(p.Status.Conditions, nexov1alpha1.ConditionReady); c != nil {
		t.Status.Conditions = []metav1.Condition{{Type: c.Type, Status: c.Status, Reason: c.Reason}}
	}
	return t, nil
}

// deploymentOf is a proxy's inventory entry; withStatus adds its phase, Ready reason and
// available revision (CapProxyStatus).
func deploymentOf(p *nexov1alpha1.NexoProxy, withStatus bool) protocol.Deployment {
	d := protocol.Deployment{Namespace: p.Namespace, Name: p.Name, Replicas: p.Status.Replicas,
		ReadyReplicas: p.Status.ReadyReplicas, GraphRevision: p.Status.GraphRevision}
	if withStatus {
		d.Phase, d.AvailableRevision = string(p.Status.Phase), p.Status.AvailableRevision
		if c := meta.FindStatusCondition(p.Status.Conditions, nexov1alpha1.ConditionReady); c != nil {
			d.ReadyReason = c.Reason
		}
	}
	return d
}

// useStatus turns withStatus on once the Control Plane announces CapProxyStatus, and rebuilds
// every entry from the cache: the changed entries go out with the next heartbeats.
func (i *proxyInventory) useStatus(resp *protocol.HeartbeatResponse) {
	i.mu.Lock()
	if i.withStatus || !slices.Contains(resp.Capabilities, protocol.CapProxyStatus) {
		i.mu.Unlock()
		return
	}
	i.withStatus = true
	i.mu.Unlock()
	if i.cached == nil {
		return
	}
	for _, p := range i.cached() {
		i.set(p)
	}
}

func (i *proxyInventory) set(obj any) {
	p, ok := obj.(*nexov1alpha1.NexoProxy)
	if !ok {
		return
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	d := deploymentOf(p, i.withStatus)
	if old, ok := i.current[d.Key()]; ok {
		if old == d {
			return
		}
		i.digest.Toggle(old)
	}
	i.current[d.Key()] = d
	i.digest.Toggle(d)
	i.dirty[d.Key()] = struct{}{}
}

func (i *proxyInventory) remove(obj any) {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	p, ok := obj.(*nexov1alpha1.NexoProxy)
	if !ok {
		return
	}
	key := protocol.ObjectRef{Namespace: p.Namespace, Name: p.Name}
	i.mu.Lock()
	defer i.mu.Unlock()
	if old, ok := i.current[key]; ok {
		i.digest.Toggle(old)
		delete(i.current, key)
		i.dirty[key] = struct{}{}
	}
}

// report fills the heartbeat's inventory: every proxy for a Control Plane that predates
// inventory.delta, else at most max changes against the confirmed inventory.
func (i *proxyInventory) report(hb *protocol.Heartbeat, max int) {
	i.mu.Lock()
	defer i.mu.Unlock()
	hb.ManagedProxies = len(i.current)
	if i.fullLists {
		hb.Deployments = make([]protocol.Deployment, 0, len(i.current))
		for _, d := range i.current {
			hb.Deployments = append(hb.Deployments, d)
		}
		slices.SortFunc(hb.Deployments, func(a, b protocol.Deployment) int {
			return compareRefs(a.Key(), b.Key())
		})
		return
	}
	hb.Capabilities = append(hb.Capabilities, protocol.CapInventoryDelta)
	hb.Deployments = nil
	hb.InventoryBase, hb.InventoryDigest = i.confirmedDigest.String(), i.digest.String()
	for key := range i.dirty {
		if len(hb.Changed)+len(hb.Removed) >= max {
			break
		}
		cur, inCur := i.current[key]
		conf, inConf := i.confirmed[key]
		switch {
		case inCur == inConf && cur == conf:
			delete(i.dirty, key) // changed and changed back
		case inCur:
			hb.Changed = append(hb.Changed, cur)
		default:
			hb.Removed = append(hb.Removed, key)
		}
	}
}

// confirm takes the Control Plane's answer to a heartbeat that carried changed and removed.
func (i *proxyInventory) confirm(hb *protocol.Heartbeat, resp *protocol.HeartbeatResponse) {
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.fullLists {
		return
	}
	if resp.InventoryDigest == "" && !resp.InventoryResync {
		i.fullLists = true // an older Control Plane: it read only Deployments
		return
	}
	expected := i.confirmedDigest
	for _, r := range hb.Removed {
		if old, ok := i.confirmed[r]; ok {
			expected.Toggle(old)
		}
	}
	for _, c := range hb.Changed {
		if old, ok := i.confirmed[c.Key()]; ok {
			expected.Toggle(old)
		}
		expected.Toggle(c)
	}
	if resp.InventoryResync || resp.InventoryDigest != expected.String() {
		// The Control Plane holds something else: start again from the empty inventory.
		i.confirmed, i.confirmedDigest = map[protocol.ObjectRef]protocol.Deployment{}, protocol.Digest{}
		for key := range i.current {
			i.dirty[key] = struct{}{}
		}
		return
	}
	for _, r := range hb.Removed {
		delete(i.confirmed, r)
	}
	for _, c := range hb.Changed {
		i.confirmed[c.Key()] = c
	}
	i.confirmedDigest = expected
	for _, key := range append(refsOf(hb.Changed), hb.Removed...) {
		cur, inCur := i.current[key]
		conf, inConf := i.confirmed[key]
		if inCur == inConf && cur == conf {
			delete(i.dirty, key)
		}
	}
}

// pending reports whether changes wait for the next heartbeat.
func (i *proxyInventory) pending() bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	return !i.fullLists && len(i.dirty) > 0
}

func refsOf(ds []protocol.Deployment) []protocol.ObjectRef {
	out := make([]protocol.ObjectRef, len(ds))
	for i, d := range ds {
		out[i] = d.Key()
	}
	return out
}

func compareRefs(a, b protocol.ObjectRef) int {
	return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
}
