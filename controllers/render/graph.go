// Package render turns a resolved NexoProxy graph into the Kubernetes objects that run it.
// Every function here is pure: same graph in, same objects out, no API calls.
package render

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"reflect"
	"sort"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/catalog"
)

// Component is one resolved reference: its kind, name, slot and spec.
type Component struct {
	Kind string       `json:"kind"`
	Name string       `json:"name"`
	Slot catalog.Slot `json:"slot"`
	Spec any          `json:"spec"`
	// SecretUses are the Secrets the object references and the keys its runtime reads
	// (nexov1alpha1.SecretUsesOf); they follow from Spec, so the revision does not hash them.
	SecretUses []nexov1alpha1.SecretUse `json:"-"`
}

// Graph is a NexoProxy with everything it references, resolved and Ready.
type Graph struct {
	Proxy    *nexov1alpha1.NexoProxy
	Pipeline *nexov1alpha1.NexoPipeline
	// Router is nil when the pipeline has none.
	Router *Component
	// Steps in pipeline order: request, then response, then connection.
	Steps         []Component
	Observability []Component
	Profile       *nexov1alpha1.NexoDeploymentProfile
	// Metrics is the attached NexoMetrics spec, if any.
	Metrics *nexov1alpha1.NexoMetricsSpec
	// OperatorNamespace holds the profile's image-pull Secrets.
	OperatorNamespace string
}

// Add places a resolved pipeline component or observability object (obj, a typed Nexo object)
// in the graph by the slot it is referenced from: its spec and the Secrets it uses; an attached
// NexoMetrics also sets Metrics. Every resolver of a proxy's graph (the operator, preflight
// --upgrade) builds it this way.
func (g *Graph) Add(kind, name string, slot catalog.Slot, obj any) {
	c := Component{Kind: kind, Name: name, Slot: slot, Spec: SpecOf(obj), SecretUses: nexov1alpha1.SecretUsesOf(obj)}
	switch slot {
	case catalog.SlotRouter:
		g.Router = &c
	case catalog.SlotObservability:
		g.Observability = append(g.Observability, c)
		if m, ok := obj.(*nexov1alpha1.NexoMetrics); ok {
			g.Metrics = &m.Spec
		}
	default:
		g.Steps = append(g.Steps, c)
	}
}

// SpecOf is the spec of a typed Nexo object (a pointer to a struct with a Spec field).
func SpecOf(obj any) any {
	return reflect.ValueOf(obj).Elem().FieldByName("Spec").Interface()
}

// Revision is a short sha256 of the graph's specs and the runtime contract's version: the same
// graph gives the same revision on any cluster with the same contract (names of referenced
// objects are part of the specs that reference them; no UIDs, namespaces or timestamps).
func Revision(g *Graph) string {
	doc := struct {
		Contract      string                                 `json:"contract"`
		Proxy         nexov1alpha1.NexoProxySpec             `json:"proxy"`
		Pipeline      nexov1alpha1.NexoPipelineSpec          `json:"pipeline"`
		Router        *Component                             `json:"router,omitempty"`
		Steps         []Component                            `json:"steps"`
		Observability []Component                            `json:"observability"`
		Profile       nexov1alpha1.NexoDeploymentProfileSpec `json:"profile"`
	}{ContractVersion, g.Proxy.Spec, g.Pipeline.Spec, g.Router, g.Steps, g.Observability, g.Profile.Spec}
	return shortHash(mustJSON(doc))
}

// ConfigHash hashes the rendered config maps' data and the content of every referenced Secret
// (name → data), so a change to either rolls the pods.
func ConfigHash(configMaps map[string]map[string]string, secrets map[string]map[string][]byte) string {
	h := sha256.New()
	write := func(name string, keys []string, value func(string) []byte) {
		sort.Strings(keys)
		h.Write([]byte(name + "\x00"))
		for _, k := range keys {
			h.Write([]byte(k + "\x00"))
			h.Write(value(k))
			h.Write([]byte{0})
		}
	}
	for _, name := range sortedKeys(configMaps) {
		data := configMaps[name]
		write("configmap/"+name, keysOf(data), func(k string) []byte { return []byte(data[k]) })
	}
	for _, name := range sortedKeys(secrets) {
		data := secrets[name]
		write("secret/"+name, keysOf(data), func(k string) []byte { return data[k] })
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

func shortHash(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:12]
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only API types and plain values reach here
	}
	return b
}

func sortedKeys[V any](m map[string]V) []string {
	keys := keysOf(m)
	sort.Strings(keys)
	return keys
}

func keysOf[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	return keys
}
