package slimcache_test

import (
	"context"
	"sort"
	"strings"
	"testing"
	"unsafe"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8slabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	fcache "k8s.io/client-go/tools/cache/testing"
	"k8s.io/utils/ptr"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/contract/scheme"
	"github.com/nexo-io/nexo-edge/controllers/slimcache"
)

func fullMeta() metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: "p", Namespace: "ns", UID: "u1", ResourceVersion: "42", Generation: 3,
		Labels:      map[string]string{"a": "b"},
		Annotations: map[string]string{"other": "x"},
		OwnerReferences: []metav1.OwnerReference{
			{APIVersion: "v1", Kind: "ConfigMap", Name: "not-controller", UID: "u2"},
			{APIVersion: "nexo.io/v1alpha1", Kind: "NexoProxy", Name: "p", UID: "u3", Controller: ptr.To(true)},
		},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}},
		Finalizers:    []string{"f"},
	}
}

func TestTrimMetadataKeepsWhatTheControllerReads(t *testing.T) {
	m := &metav1.PartialObjectMetadata{ObjectMeta: fullMeta()}
	now := metav1.Now()
	m.DeletionTimestamp = &now
	out, _ := slimcache.TrimMetadata(m)
	got := out.(*slimcache.ChildMeta)
	want := slimcache.ChildMeta{Name: "p", Namespace: "ns", ResourceVersion: "42", Generation: 3, Deleting: true,
		Owner:  slimcache.NewControllerRef("nexo.io/v1alpha1", "NexoProxy", "p", "u3"),
		Labels: slimcache.StringMapOf(map[string]string{"a": "b"}), Annotations: slimcache.StringMapOf(map[string]string{"other": "x"})}
	if *got != want {
		t.Errorf("trimmed metadata\n got %+v\nwant %+v", *got, want)
	}
	if again, _ := slimcache.TrimMetadata(got); again != got {
		t.Error("TrimMetadata is not idempotent")
	}
	// As a client.Object it answers what owner handlers and IsControlledBy ask.
	proxy := &metav1.ObjectMeta{UID: "u3"}
	if !metav1.IsControlledBy(got, proxy) || metav1.IsControlledBy(got, &metav1.ObjectMeta{UID: "u2"}) {
		t.Error("IsControlledBy does not follow the kept controller reference")
	}
	if got.GetDeletionTimestamp() == nil || got.GetResourceVersion() != "42" || len(got.GetOwnerReferences()) != 1 {
		t.Errorf("accessors: %+v", got)
	}
	if c := got.DeepCopyObject().(*slimcache.ChildMeta); c == got || *c != *got {
		t.Error("DeepCopyObject is not an equal, separate copy")
	}
	noOwner := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "x", OwnerReferences: fullMeta().OwnerReferences[:1]}}
	if o, _ := slimcache.TrimMetadata(noOwner); o.(*slimcache.ChildMeta).GetOwnerReferences() != nil {
		t.Error("a non-controller owner reference was kept")
	}
	// Anything else passes through unchanged (tombstones, other types).
	cm := &corev1.ConfigMap{ObjectMeta: fullMeta()}
	if out, _ := slimcache.TrimMetadata(cm); !equality.Semantic.DeepEqual(out, &corev1.ConfigMap{ObjectMeta: fullMeta()}) {
		t.Error("TrimMetadata changed an object that is not PartialObjectMetadata")
	}
}

func TestTrimDeploymentKeepsReplicasCountsAndALabelsHash(t *testing.T) {
	d := &appsv1.Deployment{ObjectMeta: fullMeta(),
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "ingress", Image: "i"}}}}},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 3, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 1, AvailableReplicas: 1,
			Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Message: "long text"}}}}
	out, _ := slimcache.TrimDeployment(d)
	got := out.(*slimcache.DeploymentState)
	if got.Name != "p" || got.Generation != 3 || got.Owner.UID != "u3" {
		t.Errorf("metadata %+v", got.ChildMeta)
	}
	want := slimcache.ReplicaCounts{ObservedGeneration: 3, Replicas: 2, UpdatedReplicas: 2, ReadyReplicas: 1, Available: 1}
	if got.Replicas != 2 || got.Status != want {
		t.Errorf("replicas %d, counts %+v", got.Replicas, got.Status)
	}
	if again, _ := slimcache.TrimDeployment(got); again != got {
		t.Error("TrimDeployment is not idempotent")
	}
	// The labels hash moves with any label edit and ignores map order.
	relabel := func(labels map[string]string) uint64 {
		c := d.DeepCopy()
		c.Labels = labels
		o, _ := slimcache.TrimDeployment(c)
		return o.(*slimcache.DeploymentState).LabelsHash
	}
	if relabel(map[string]string{"a": "b", "c": "d"}) != relabel(map[string]string{"c": "d", "a": "b"}) {
		t.Error("labels hash depends on order")
	}
	for _, l := range []map[string]string{{"a": "x"}, {"a": "b", "c": "d"}, {"ab": ""}, nil} {
		if relabel(l) == got.LabelsHash {
			t.Errorf("labels %v hash like {a: b}", l)
		}
	}
	// Unset replicas are one, as the API server defaults them.
	d.Spec.Replicas = nil
	if o, _ := slimcache.TrimDeployment(d.DeepCopy()); o.(*slimcache.DeploymentState).Replicas != 1 {
		t.Error("unset replicas are not 1")
	}
	if c := got.DeepCopyObject().(*slimcache.DeploymentState); c == got || *c != *got {
		t.Error("DeepCopyObject is not an equal, separate copy")
	}
}

// The proxy cache keeps the whole proxy but managedFields; condition strings that every proxy
// repeats are kept once, and the conditions slice has no spare capacity.
func TestTrimProxySharesRepeatedStrings(t *testing.T) {
	decoded := func() *nexov1alpha1.NexoProxy {
		p := &nexov1alpha1.NexoProxy{ObjectMeta: fullMeta()}
		p.Namespace = strings.Clone("ns")
		p.Spec.PipelineRef.Name = strings.Clone("pipe")
		p.Spec.ProfileRef.Name = strings.Clone("standard")
		p.Spec.LicenseRef.Name = strings.Clone("fleet")
		p.Spec.ObservabilityRefs = []nexov1alpha1.ObservabilityRef{{Kind: strings.Clone("NexoMetrics"), Name: strings.Clone("m")}}
		conds := make([]metav1.Condition, 0, 8)
		for _, typ := range []string{"Validated", "Ready", "Licensed"} {
			conds = append(conds, metav1.Condition{Type: strings.Clone(typ), Status: metav1.ConditionStatus(strings.Clone("True")),
				Reason: strings.Clone("Passed"), Message: strings.Clone("spec is valid")})
		}
		p.Status.Conditions = conds
		p.Status.Phase = nexov1alpha1.ProxyPhase(strings.Clone("Ready"))
		return p
	}
	a, _ := slimcache.TrimProxy(decoded())
	b, _ := slimcache.TrimProxy(decoded())
	pa, pb := a.(*nexov1alpha1.NexoProxy), b.(*nexov1alpha1.NexoProxy)
	if len(pa.ManagedFields) != 0 || pa.Spec.PipelineRef.Name != "pipe" || pa.Labels["a"] != "b" {
		t.Errorf("trimmed proxy %+v", pa)
	}
	if cap(pa.Status.Conditions) != 3 || !equality.Semantic.DeepEqual(pa.Status.Conditions, decoded().Status.Conditions) {
		t.Errorf("conditions %+v (cap %d)", pa.Status.Conditions, cap(pa.Status.Conditions))
	}
	for i := range pa.Status.Conditions {
		ca, cb := pa.Status.Conditions[i], pb.Status.Conditions[i]
		for _, pair := range [][2]string{{ca.Type, cb.Type}, {string(ca.Status), string(cb.Status)}, {ca.Reason, cb.Reason}, {ca.Message, cb.Message}} {
			if unsafe.StringData(pair[0]) != unsafe.StringData(pair[1]) {
				t.Errorf("condition %d: %q is not shared between cached proxies", i, pair[0])
			}
		}
	}
	for _, pair := range [][2]string{{pa.Namespace, pb.Namespace}, {pa.Spec.PipelineRef.Name, pb.Spec.PipelineRef.Name},
		{pa.Spec.ProfileRef.Name, pb.Spec.ProfileRef.Name}, {pa.Spec.LicenseRef.Name, pb.Spec.LicenseRef.Name},
		{pa.Spec.ObservabilityRefs[0].Kind, pb.Spec.ObservabilityRefs[0].Kind}, {pa.Spec.ObservabilityRefs[0].Name, pb.Spec.ObservabilityRefs[0].Name}} {
		if pair[0] == "" || unsafe.StringData(pair[0]) != unsafe.StringData(pair[1]) {
			t.Errorf("%q is not shared between cached proxies", pair[0])
		}
	}
	if unsafe.StringData(string(pa.Status.Phase)) != unsafe.StringData(string(pb.Status.Phase)) {
		t.Error("phase is not shared")
	}
}

// Strings every child repeats are kept once: two decoded objects share the owner's kind after
// trimming.
func TestTrimSharesRepeatedStrings(t *testing.T) {
	decoded := func() *metav1.PartialObjectMetadata {
		m := fullMeta()
		m.OwnerReferences[1].Kind = strings.Clone("NexoProxy")
		m.OwnerReferences[1].UID = types.UID(strings.Clone(string(m.OwnerReferences[1].UID)))
		m.Namespace = strings.Clone("ns")
		return &metav1.PartialObjectMetadata{ObjectMeta: m}
	}
	a, _ := slimcache.TrimMetadata(decoded())
	b, _ := slimcache.TrimMetadata(decoded())
	ma, mb := a.(*slimcache.ChildMeta), b.(*slimcache.ChildMeta)
	if ma.Owner.Type != mb.Owner.Type || ma.Owner.Kind() != "NexoProxy" {
		t.Error("owner kind is not shared between cached objects")
	}
	if unsafe.StringData(string(ma.Owner.UID)) != unsafe.StringData(string(mb.Owner.UID)) {
		t.Error("owner UID is not shared between cached objects")
	}
	if unsafe.StringData(ma.Namespace) != unsafe.StringData(mb.Namespace) {
		t.Error("namespace is not shared between cached objects")
	}
}

// A Store reads the trimmed entries from the informers the registry created, by name and by
// owner, across the several informers a multi-namespace cache creates for one kind.
func TestStoreReadsTheInformersOwnStores(t *testing.T) {
	reg := &slimcache.Registry{Scheme: scheme.New()}
	store := slimcache.ForOwned[*slimcache.ChildMeta](reg, corev1.SchemeGroupVersion.WithKind("ConfigMap"), true)
	if _, ok := store.Get(types.NamespacedName{Namespace: "a", Name: "x"}); ok {
		t.Fatal("an entry before any informer exists")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// x is owned by u1 in both namespaces, y by u2; z has an owner reference that is not a controller.
	var informers []toolscache.SharedIndexInformer
	for _, ns := range []string{"a", "b"} {
		informers = append(informers, runInformer(ctx, t, reg, ns, map[string]types.UID{"x": "u1", "y": "u2", "z": ""}))
	}
	// Another kind's informer is not read, and keeps the indexes the cache asked for.
	secrets := reg.NewInformer(fcache.NewFakeControllerSource(), slimcache.MetadataOf(corev1.SchemeGroupVersion.WithKind("Secret")), 0, toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc})
	if _, ok := secrets.GetIndexer().GetIndexers()[toolscache.NamespaceIndex]; !ok {
		t.Error("an informer no Store reads lost the namespace index")
	}

	if m, ok := store.Get(types.NamespacedName{Namespace: "b", Name: "y"}); !ok || m.Name != "y" || m.Namespace != "b" {
		t.Errorf("Get b/y = %+v, %v", m, ok)
	}
	if _, ok := store.Get(types.NamespacedName{Namespace: "c", Name: "y"}); ok {
		t.Error("Get c/y found an entry")
	}
	for _, inf := range informers {
		if _, ok := inf.GetIndexer().GetIndexers()[slimcache.OwnerIndex]; !ok {
			t.Error("an informer of a ForOwned kind has no owner index")
		}
		// A Store never lists by namespace: its kind's informers keep no namespace index, and a
		// namespaced list through them fails instead of walking every entry.
		if _, ok := inf.GetIndexer().GetIndexers()[toolscache.NamespaceIndex]; ok {
			t.Error("an informer a Store reads kept the namespace index")
		}
		if _, err := inf.GetIndexer().ByIndex(toolscache.NamespaceIndex, "a"); err == nil {
			t.Error("a namespaced list of a Store's kind did not fail")
		}
	}
	all := func(*slimcache.ChildMeta) bool { return true }
	if got := names(store.Owned("u1", all)); got != "a/x b/x" {
		t.Errorf("Owned(u1) = %s", got)
	}
	if got := names(store.Owned("u1", func(m *slimcache.ChildMeta) bool { return m.Namespace == "b" })); got != "b/x" {
		t.Errorf("Owned(u1, in b) = %s", got)
	}
	if got := names(store.Owned("u3", all)); got != "" {
		t.Errorf("Owned(u3) = %s", got)
	}
	if other := slimcache.For[*slimcache.ChildMeta](reg, corev1.SchemeGroupVersion.WithKind("ConfigMap"), false); len(other.Owned("u1", all)) != 0 {
		t.Error("a typed ConfigMap store reads the metadata informers")
	}

	// An informer made before ForOwned has no index; Owned walks it and finds the same entries.
	late := &slimcache.Registry{Scheme: scheme.New()}
	inf := runInformer(ctx, t, late, "a", map[string]types.UID{"x": "u1", "y": "u2"})
	if _, ok := inf.GetIndexer().GetIndexers()[slimcache.OwnerIndex]; ok {
		t.Fatal("an informer made before ForOwned has the owner index")
	}
	if _, ok := inf.GetIndexer().GetIndexers()[toolscache.NamespaceIndex]; !ok {
		t.Fatal("an informer made before ForOwned lost the namespace index")
	}
	if got := names(slimcache.ForOwned[*slimcache.ChildMeta](late, corev1.SchemeGroupVersion.WithKind("ConfigMap"), true).Owned("u1", all)); got != "a/x" {
		t.Errorf("Owned(u1) without the index = %s", got)
	}
}

// runInformer runs a synced metadata-only ConfigMap informer of reg over ns, one entry per name,
// controlled by the given UID (none when empty).
func runInformer(ctx context.Context, t *testing.T, reg *slimcache.Registry, ns string, owners map[string]types.UID) toolscache.SharedIndexInformer {
	t.Helper()
	src := fcache.NewFakeControllerSource()
	for name, uid := range owners {
		m := slimcache.MetadataOf(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
		m.Namespace, m.Name, m.ResourceVersion = ns, name, "1"
		m.OwnerReferences = []metav1.OwnerReference{{APIVersion: "nexo.io/v1alpha1", Kind: "NexoProxy", Name: "p", UID: uid, Controller: ptr.To(uid != "")}}
		src.Add(m)
	}
	inf := reg.NewInformer(src, slimcache.MetadataOf(corev1.SchemeGroupVersion.WithKind("ConfigMap")), 0, toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc})
	if err := inf.SetTransform(slimcache.TrimMetadata); err != nil {
		t.Fatal(err)
	}
	go inf.Run(ctx.Done())
	if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("no sync")
	}
	return inf
}

// names lists entries as sorted namespace/name.
func names(ms []*slimcache.ChildMeta) string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Namespace+"/"+m.Name)
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// A ChildMeta carries its labels and annotations: a label predicate over a ChildMeta informer
// sees what the object has, and children with the same labels share one copy.
func TestChildMetaCarriesLabelsAndAnnotations(t *testing.T) {
	labels := map[string]string{"app.kubernetes.io/instance": "p", "nexo.io/proxy": "p"}
	m := fullMeta()
	m.Labels, m.Annotations = labels, map[string]string{"nexo.io/copied-from": "ops/pull"}
	out, _ := slimcache.TrimMetadata(&metav1.PartialObjectMetadata{ObjectMeta: m})
	c := out.(*slimcache.ChildMeta)
	if got := c.GetLabels(); !equality.Semantic.DeepEqual(got, labels) {
		t.Errorf("labels %v", got)
	}
	if got := c.GetAnnotations(); got["nexo.io/copied-from"] != "ops/pull" || len(got) != 1 {
		t.Errorf("annotations %v", got)
	}
	// A copy: changing what GetLabels returned does not change the entry.
	c.GetLabels()["nexo.io/proxy"] = "other"
	if c.GetLabels()["nexo.io/proxy"] != "p" {
		t.Error("GetLabels returned the entry's own map")
	}
	// Equal sets are one handle, whatever the order they were built in; different sets differ.
	other := slimcache.StringMapOf(map[string]string{"nexo.io/proxy": "p", "app.kubernetes.io/instance": "p"})
	if other != c.Labels || slimcache.StringMapOf(map[string]string{"nexo.io/proxy": "q"}) == c.Labels {
		t.Error("StringMap equality does not follow the set")
	}
	c.SetLabels(nil)
	if c.GetLabels() != nil || c.Labels != (slimcache.StringMap{}) {
		t.Error("cleared labels are not the empty set")
	}
	// A label selector reads them, as controller-runtime's label predicates do.
	c.SetLabels(labels)
	if !k8slabels.SelectorFromSet(k8slabels.Set{"nexo.io/proxy": "p"}).Matches(k8slabels.Set(c.GetLabels())) {
		t.Error("a selector does not match the entry's labels")
	}
}

// The cache entries' sizes are what their doc comments promise (they are held several times per
// proxy): a field added here shows up in make bench's memory per proxy.
func TestEntrySizes(t *testing.T) {
	if got := unsafe.Sizeof(slimcache.ChildMeta{}); got > 128 {
		t.Errorf("ChildMeta is %d bytes, want at most 128", got)
	}
	if got := unsafe.Sizeof(slimcache.DeploymentState{}); got > 168 {
		t.Errorf("DeploymentState is %d bytes, want at most 168", got)
	}
}
