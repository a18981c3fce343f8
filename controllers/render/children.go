package render

import (
	"crypto/sha256"
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Children are the kinds of object the operator generates for a NexoProxy, in the order a pass
// applies them. This table is the one place a child kind is declared: the operator's apply, its
// content hash, its watches and cache configuration, the generated RBAC markers
// (controllers/zz_generated.rbac.go), nexoctl status and the bundle's CSV all read it. Adding a
// child kind is one entry here plus its renderer; docs/development.md says what else to check.
var Children = []ChildKind{ConfigMapChild, SecretChild, DeploymentChild, ServiceChild}

// CacheShape is what the operator's informer keeps of each object of a child kind
// (controllers/slimcache).
type CacheShape int

const (
	// CacheMetadata: a ChildMeta, from a metadata-only informer.
	CacheMetadata CacheShape = iota
	// CacheDeploymentState: a DeploymentState, the replica counts the proxy's availability is
	// computed from.
	CacheDeploymentState
)

// Inputs is what rendering needs besides the resolved graph.
type Inputs struct {
	// ConfigHash and Revision identify the graph revision (the ConfigMaps' names, the pod
	// template's annotations).
	ConfigHash, Revision string
	// PullSecrets are the profile's shareable pull Secrets of the operator namespace.
	PullSecrets []*corev1.Secret
}

// ChildKind is one kind of generated child.
type ChildKind struct {
	GVK schema.GroupVersionKind
	// Resource is the kind's plural (RBAC, the CSV).
	Resource string
	// Verbs are what the operator's RBAC grants on the kind.
	Verbs []string
	// Cache is what the kind's informer keeps.
	Cache CacheShape
	// AllObjects: the informer caches every object of the kind in the watched namespaces and the
	// operator namespace, not only the operator's own (Secrets: proxies reference Secrets that
	// the operator did not make).
	AllObjects bool
	// ListOwned: the operator lists a proxy's children of this kind (to prune them), so the
	// informer keeps an index by controller.
	ListOwned bool
	// New returns an empty object of the kind, to read one in full.
	New func() client.Object
	// Render returns the proxy's desired objects of the kind.
	Render func(g *Graph, in Inputs) []client.Object
	// content is what the content hash covers besides labels and annotations.
	content func(client.Object) any
	// inSync reports whether existing (read in full) holds what desired sets.
	inSync func(desired, existing client.Object) bool
	// correct sets what desired sets on existing, keeping what the API server allocated.
	correct func(desired, existing client.Object)
}

// Kind is the kind's name ("Deployment").
func (k ChildKind) Kind() string { return k.GVK.Kind }

// ContentHash hashes what the operator sets on a generated object: its labels and annotations,
// and the kind's content (a ConfigMap's data, a Secret's type and data, a Deployment's or a
// Service's spec). The operator remembers it with the version of the child it last wrote or
// compared in full, so a child whose version has not moved is known to hold this content without
// reading it.
func (k ChildKind) ContentHash(o client.Object) Hash {
	sum := sha256.Sum256(mustJSON(struct {
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations,omitempty"`
		Content     any               `json:"content"`
	}{o.GetLabels(), o.GetAnnotations(), k.content(o)}))
	var h Hash
	copy(h[:], sum[:])
	return h
}

// InSync reports whether existing, read in full, holds everything desired sets: labels as a
// subset (others may add labels), and the kind's own fields compared as the API server stores
// them (defaulted fields ignored).
func (k ChildKind) InSync(desired, existing client.Object) bool {
	return labelsSubset(desired, existing) && k.inSync(desired, existing)
}

// Correct sets on existing what desired sets (its labels merged in), keeping what the API server
// allocated; existing can then be written back.
func (k ChildKind) Correct(desired, existing client.Object) {
	k.correct(desired, existing)
	mergeLabels(desired, existing)
}

// Hash is a content hash the operator keeps in memory for every child: a fixed-size value (the
// first 128 bits of a SHA-256), so remembering it costs no allocation.
type Hash [16]byte

var core = corev1.SchemeGroupVersion

// ConfigMapChild: a proxy's routing and steps config, one immutable pair per graph revision.
var ConfigMapChild = ChildKind{
	GVK: core.WithKind("ConfigMap"), Resource: "configmaps", Verbs: writeVerbs,
	Cache: CacheMetadata, ListOwned: true,
	New: func() client.Object { return &corev1.ConfigMap{} },
	Render: func(g *Graph, in Inputs) []client.Object {
		var out []client.Object
		for _, cm := range ConfigMaps(g, in.Revision) {
			out = append(out, cm)
		}
		return out
	},
	content: func(o client.Object) any { return o.(*corev1.ConfigMap).Data },
	inSync: func(d, e client.Object) bool {
		return equality.Semantic.DeepEqual(d.(*corev1.ConfigMap).Data, e.(*corev1.ConfigMap).Data)
	},
	correct: func(d, e client.Object) { e.(*corev1.ConfigMap).Data = d.(*corev1.ConfigMap).Data },
}

// SecretChild: a proxy's copies of its profile's shareable pull Secrets.
var SecretChild = ChildKind{
	GVK: core.WithKind("Secret"), Resource: "secrets", Verbs: writeVerbs,
	Cache: CacheMetadata, AllObjects: true, ListOwned: true,
	New: func() client.Object { return &corev1.Secret{} },
	Render: func(g *Graph, in Inputs) []client.Object {
		var out []client.Object
		for _, src := range in.PullSecrets {
			out = append(out, PullSecret(g, src))
		}
		return out
	},
	content: func(o client.Object) any {
		s := o.(*corev1.Secret)
		return struct {
			Type corev1.SecretType `json:"type"`
			Data map[string][]byte `json:"data"`
		}{s.Type, s.Data}
	},
	inSync: func(d, e client.Object) bool {
		ds, es := d.(*corev1.Secret), e.(*corev1.Secret)
		return equality.Semantic.DeepEqual(ds.Data, es.Data) && ds.Type == es.Type &&
			es.Annotations[CopiedFromKey] == ds.Annotations[CopiedFromKey]
	},
	correct: func(d, e client.Object) {
		ds, es := d.(*corev1.Secret), e.(*corev1.Secret)
		es.Data, es.Type = ds.Data, ds.Type
		es.Annotations = maps.Clone(ds.Annotations)
	},
}

// DeploymentChild: the proxy's workload.
var DeploymentChild = ChildKind{
	GVK: appsv1.SchemeGroupVersion.WithKind("Deployment"), Resource: "deployments", Verbs: writeVerbs,
	Cache: CacheDeploymentState,
	New:   func() client.Object { return &appsv1.Deployment{} },
	Render: func(g *Graph, in Inputs) []client.Object {
		return []client.Object{Deployment(g, in.ConfigHash, in.Revision)}
	},
	content: func(o client.Object) any { return o.(*appsv1.Deployment).Spec },
	inSync:  func(d, e client.Object) bool { return deploymentInSync(d.(*appsv1.Deployment), e.(*appsv1.Deployment)) },
	correct: func(d, e client.Object) { e.(*appsv1.Deployment).Spec = d.(*appsv1.Deployment).Spec },
}

// ServiceChild: the proxy's Service.
var ServiceChild = ChildKind{
	GVK: core.WithKind("Service"), Resource: "services", Verbs: writeVerbs,
	Cache: CacheMetadata,
	New:   func() client.Object { return &corev1.Service{} },
	Render: func(g *Graph, _ Inputs) []client.Object {
		return []client.Object{Service(g)}
	},
	content: func(o client.Object) any { return o.(*corev1.Service).Spec },
	inSync:  func(d, e client.Object) bool { return serviceInSync(d.(*corev1.Service), e.(*corev1.Service)) },
	correct: func(d, e client.Object) { correctService(d.(*corev1.Service), e.(*corev1.Service)) },
}

// writeVerbs: the operator creates, corrects and deletes its children, and watches them.
var writeVerbs = []string{"get", "list", "watch", "create", "update", "patch", "delete"}

func labelsSubset(desired, existing client.Object) bool {
	have := existing.GetLabels()
	for k, v := range desired.GetLabels() {
		if have[k] != v {
			return false
		}
	}
	return true
}

func mergeLabels(desired, existing client.Object) {
	labels := maps.Clone(existing.GetLabels())
	if labels == nil {
		labels = map[string]string{}
	}
	maps.Copy(labels, desired.GetLabels())
	existing.SetLabels(labels)
}

// deploymentInSync compares what the operator sets; fields the API server defaults are ignored
// (DeepDerivative), but list lengths must match so removed containers, volumes or ports count.
func deploymentInSync(desired, existing *appsv1.Deployment) bool {
	d, e := desired.Spec.Template.Spec, existing.Spec.Template.Spec
	if len(d.Containers) != len(e.Containers) || len(d.Volumes) != len(e.Volumes) || len(d.ImagePullSecrets) != len(e.ImagePullSecrets) {
		return false
	}
	for i := range d.Containers {
		if len(d.Containers[i].Ports) != len(e.Containers[i].Ports) || len(d.Containers[i].VolumeMounts) != len(e.Containers[i].VolumeMounts) {
			return false
		}
	}
	return equality.Semantic.DeepDerivative(desired.Spec, existing.Spec) &&
		equality.Semantic.DeepEqual(desired.Spec.Template.Annotations, existing.Spec.Template.Annotations)
}

func serviceInSync(desired, existing *corev1.Service) bool {
	return desired.Spec.Type == existing.Spec.Type &&
		len(desired.Spec.Ports) == len(existing.Spec.Ports) &&
		equality.Semantic.DeepEqual(desired.Spec.Selector, existing.Spec.Selector) &&
		equality.Semantic.DeepDerivative(portsKeepingAllocated(desired, existing), existing.Spec.Ports)
}

// portsKeepingAllocated returns the desired ports, where a port the operator does not pin keeps
// the node port the API server allocated to it. (DeepDerivative ignores unset strings and
// pointers, but not a zero nodePort.)
func portsKeepingAllocated(desired, existing *corev1.Service) []corev1.ServicePort {
	ports := make([]corev1.ServicePort, len(desired.Spec.Ports))
	copy(ports, desired.Spec.Ports)
	if desired.Spec.Type != corev1.ServiceTypeNodePort || existing.Spec.Type != corev1.ServiceTypeNodePort {
		return ports
	}
	for i := range ports {
		if ports[i].NodePort == 0 {
			for _, e := range existing.Spec.Ports {
				if e.Name == ports[i].Name {
					ports[i].NodePort = e.NodePort
				}
			}
		}
	}
	return ports
}

// correctService sets the fields the operator owns and leaves the allocated ones (clusterIP,
// node ports it does not pin).
func correctService(desired, existing *corev1.Service) {
	existing.Spec.Ports = portsKeepingAllocated(desired, existing)
	existing.Spec.Type = desired.Spec.Type
	existing.Spec.Selector = desired.Spec.Selector
	if desired.Spec.Type == corev1.ServiceTypeClusterIP {
		existing.Spec.ExternalTrafficPolicy = ""
	}
}
