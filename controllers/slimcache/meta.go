package slimcache

import (
	"encoding/json"
	"unique"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// ChildMeta is what the operator keeps of each generated child and each Secret in its caches:
// name, namespace, resourceVersion, generation, whether it is being deleted, its controller
// reference, and its labels and annotations (interned: see StringMap). A
// metav1.PartialObjectMetadata is 288 bytes before any of its strings, maps and an owner
// reference slice; a ChildMeta is 128, and the caches hold several per proxy.
//
// It is a client.Object so informers, predicates and owner handlers take it as they are, and
// every accessor they may call answers truly: what it does not keep (UID, creation time,
// finalizers, managed fields) no controller of this operator reads from a cached child, and
// their getters return the zero value, as for an object that has none.
type ChildMeta struct {
	Name, Namespace, ResourceVersion string
	Generation                       int64
	Deleting                         bool
	Owner                            ControllerRef
	Labels, Annotations              StringMap
}

// ControllerRef is a controller owner reference (zero: none). The owner's API version and kind
// are one interned pair, held by a pointer-sized handle, and the owner's UID is interned (every
// child of a proxy carries it): a reference is 40 bytes, not 64, and holds no string of its own
// but the owner's name.
type ControllerRef struct {
	Type unique.Handle[OwnerType]
	Name string
	UID  types.UID
}

// OwnerType is an owner's API version and kind.
type OwnerType struct{ APIVersion, Kind string }

// NewControllerRef is the reference to the owner apiVersion/kind name with uid.
func NewControllerRef(apiVersion, kind, name string, uid types.UID) ControllerRef {
	return ControllerRef{Type: unique.Make(OwnerType{apiVersion, kind}), Name: name, UID: types.UID(Intern(string(uid)))}
}

// APIVersion is the owner's API version ("" for no owner).
func (r ControllerRef) APIVersion() string { return r.ownerType().APIVersion }

// Kind is the owner's kind ("" for no owner).
func (r ControllerRef) Kind() string { return r.ownerType().Kind }

func (r ControllerRef) ownerType() OwnerType {
	if r.Type == (unique.Handle[OwnerType]{}) {
		return OwnerType{}
	}
	return r.Type.Value()
}

// MetaOf keeps what ChildMeta holds of an object's metadata; repeated strings are interned.
func MetaOf(m metav1.Object) ChildMeta {
	c := ChildMeta{Name: m.GetName(), Namespace: Intern(m.GetNamespace()), ResourceVersion: m.GetResourceVersion(),
		Generation: m.GetGeneration(), Deleting: m.GetDeletionTimestamp() != nil,
		Labels: StringMapOf(m.GetLabels()), Annotations: StringMapOf(m.GetAnnotations())}
	if ref := metav1.GetControllerOfNoCopy(m); ref != nil {
		c.Owner = NewControllerRef(ref.APIVersion, ref.Kind, ref.Name, ref.UID)
	}
	return c
}

func (c *ChildMeta) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }
func (c *ChildMeta) DeepCopyObject() runtime.Object   { out := *c; return &out }

func (c *ChildMeta) GetNamespace() string                          { return c.Namespace }
func (c *ChildMeta) SetNamespace(ns string)                        { c.Namespace = ns }
func (c *ChildMeta) GetName() string                               { return c.Name }
func (c *ChildMeta) SetName(name string)                           { c.Name = name }
func (c *ChildMeta) GetGenerateName() string                       { return "" }
func (c *ChildMeta) SetGenerateName(string)                        {}
func (c *ChildMeta) GetUID() types.UID                             { return "" }
func (c *ChildMeta) SetUID(types.UID)                              {}
func (c *ChildMeta) GetResourceVersion() string                    { return c.ResourceVersion }
func (c *ChildMeta) SetResourceVersion(v string)                   { c.ResourceVersion = v }
func (c *ChildMeta) GetGeneration() int64                          { return c.Generation }
func (c *ChildMeta) SetGeneration(g int64)                         { c.Generation = g }
func (c *ChildMeta) GetSelfLink() string                           { return "" }
func (c *ChildMeta) SetSelfLink(string)                            {}
func (c *ChildMeta) GetCreationTimestamp() metav1.Time             { return metav1.Time{} }
func (c *ChildMeta) SetCreationTimestamp(metav1.Time)              {}
func (c *ChildMeta) GetDeletionGracePeriodSeconds() *int64         { return nil }
func (c *ChildMeta) SetDeletionGracePeriodSeconds(*int64)          {}
func (c *ChildMeta) GetFinalizers() []string                       { return nil }
func (c *ChildMeta) SetFinalizers([]string)                        {}
func (c *ChildMeta) GetManagedFields() []metav1.ManagedFieldsEntry { return nil }
func (c *ChildMeta) SetManagedFields([]metav1.ManagedFieldsEntry)  {}

// GetDeletionTimestamp is a non-nil (zero) time when the object is being deleted.
func (c *ChildMeta) GetDeletionTimestamp() *metav1.Time {
	if c.Deleting {
		return &metav1.Time{}
	}
	return nil
}

func (c *ChildMeta) SetDeletionTimestamp(t *metav1.Time) { c.Deleting = t != nil }

// GetOwnerReferences is the controller reference, if any (the only one kept).
func (c *ChildMeta) GetOwnerReferences() []metav1.OwnerReference {
	if c.Owner == (ControllerRef{}) {
		return nil
	}
	controller := true
	return []metav1.OwnerReference{{APIVersion: c.Owner.APIVersion(), Kind: c.Owner.Kind(), Name: c.Owner.Name, UID: c.Owner.UID, Controller: &controller}}
}

// SetOwnerReferences keeps the controller reference among refs.
func (c *ChildMeta) SetOwnerReferences(refs []metav1.OwnerReference) {
	c.Owner = ControllerRef{}
	for _, r := range refs {
		if r.Controller != nil && *r.Controller {
			c.Owner = NewControllerRef(r.APIVersion, r.Kind, r.Name, r.UID)
		}
	}
}

// MetadataOf is the object a metadata-only informer of a kind is asked for by.
func MetadataOf(gvk schema.GroupVersionKind) *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(gvk)
	return m
}

// GetLabels returns a copy of the labels (nil when there are none).
func (c *ChildMeta) GetLabels() map[string]string { return c.Labels.Map() }

// SetLabels keeps labels, interned.
func (c *ChildMeta) SetLabels(l map[string]string) { c.Labels = StringMapOf(l) }

// GetAnnotations returns a copy of the annotations (nil when there are none).
func (c *ChildMeta) GetAnnotations() map[string]string { return c.Annotations.Map() }

// SetAnnotations keeps annotations, interned.
func (c *ChildMeta) SetAnnotations(a map[string]string) { c.Annotations = StringMapOf(a) }

// StringMap is a label or annotation set kept as one interned canonical string (its JSON, whose
// keys encoding/json sorts): the children of a proxy carry the same labels, so they share one
// copy, and an entry holds one pointer-sized handle per set instead of a map. The zero value is
// the empty set. Two StringMaps are equal (==) exactly when their sets are.
type StringMap struct{ h unique.Handle[string] }

// StringMapOf interns m.
func StringMapOf(m map[string]string) StringMap {
	if len(m) == 0 {
		return StringMap{}
	}
	raw, _ := json.Marshal(m) // a map of strings always encodes
	return StringMap{unique.Make(string(raw))}
}

// Map returns a fresh copy of the set (nil when empty).
func (s StringMap) Map() map[string]string {
	if s == (StringMap{}) {
		return nil
	}
	var m map[string]string
	_ = json.Unmarshal([]byte(s.h.Value()), &m) // written by StringMapOf
	return m
}
