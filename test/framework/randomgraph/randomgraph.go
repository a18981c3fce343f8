// Package randomgraph builds resolved NexoProxy graphs from a fuzzer's bytes: every value within
// what the CRDs admit (names, ports, replicas, images, references), the choices otherwise free.
// The renderers are fuzzed over them (render), and the objects rendered from them are checked
// against a real API server (test/reliability).
package randomgraph

import (
	"fmt"
	"reflect"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/catalog"
	"github.com/nexo-io/nexo-edge/controllers/render"
)

// Decisions hands out a fuzzer's bytes one decision at a time; zeros once they run out.
type Decisions []byte

// Next is the next byte, 0 to 255.
func (b *Decisions) Next() int {
	if len(*b) == 0 {
		return 0
	}
	v := int((*b)[0])
	*b = (*b)[1:]
	return v
}

// Pick is one of options.
func (b *Decisions) Pick(options []string) string { return options[b.Next()%len(options)] }

// upTo is a number in [lo, hi], from two bytes.
func (b *Decisions) upTo(lo, hi int) int { return lo + (b.Next()<<8|b.Next())%(hi-lo+1) }

const (
	letters = "abcdefghijklmnopqrstuvwxyz"
	alnum   = letters + "0123456789"
)

// label is a DNS-1035 label of 1 to max characters (a letter first, no '-' last).
func (b *Decisions) label(max int) string {
	n := 1 + b.Next()%max
	out := make([]byte, n)
	for i := range out {
		switch c := b.Next(); {
		case i == 0:
			out[i] = letters[c%len(letters)]
		case i < n-1 && c%7 == 0:
			out[i] = '-'
		default:
			out[i] = alnum[c%len(alnum)]
		}
	}
	return string(out)
}

// subdomain is a DNS-1123 subdomain of up to 253 characters: dot-separated labels; one in four
// is as long as the API server allows (names built from it must still fit).
func (b *Decisions) subdomain() string {
	s := b.label(63)
	if b.Next()%4 == 0 {
		for len(s) < 253-2 {
			s += "." + b.label(min(63, 253-len(s)-1))
		}
		return s
	}
	for parts := b.Next() % 4; parts > 0; parts-- {
		s += "." + b.label(40)
	}
	return s
}

// image is an image reference of the form the CRDs accept, with a tag or a digest.
func (b *Decisions) image() nexov1alpha1.Image {
	ref := "registry.example.com/" + b.label(20) + "/" + b.label(30)
	if b.Next()%3 == 0 {
		return nexov1alpha1.Image(fmt.Sprintf("%s@sha256:%064x", ref, b.Next()))
	}
	return nexov1alpha1.Image(fmt.Sprintf("%s:%d.%d.%d", ref, b.Next()%10, b.Next(), b.Next()))
}

// FromBytes builds a graph: a proxy in a random namespace with random name, port, replicas,
// TLS, local access and image; a profile with images, a step catalog, pull Secrets and defaults;
// a router and up to six steps of reconciled kinds in allowed slots; maybe observability and
// a NexoMetrics on its own port.
func FromBytes(data []byte) *render.Graph {
	in := Decisions(data)
	scheme := runtime.NewScheme()
	_ = nexov1alpha1.AddToScheme(scheme)

	proxy := &nexov1alpha1.NexoProxy{}
	proxy.Name, proxy.Namespace = in.label(63), in.label(63)
	proxy.Spec.Port = int32(in.upTo(1, 65535))
	if in.Next()%2 == 0 {
		proxy.Spec.Replicas = ptr.To(int32(in.upTo(0, 100)))
	}
	if in.Next()%3 == 0 {
		proxy.Spec.ProxyImage = in.image()
	}
	if in.Next()%3 == 0 {
		proxy.Spec.TLS = &nexov1alpha1.ProxyTLS{SecretRef: nexov1alpha1.SecretReference{Name: in.subdomain()}}
		if in.Next()%2 == 0 {
			proxy.Spec.TLS.ClientCASecretRef = &nexov1alpha1.SecretReference{Name: in.subdomain()}
		}
	}
	proxy.Spec.Upstream = nexov1alpha1.Target{Name: in.label(20), Address: nexov1alpha1.Address(in.subdomain() + fmt.Sprintf(":%d", in.upTo(1, 65535)))}
	if in.Next()%4 == 0 {
		proxy.Spec.Upstream.TLS = &nexov1alpha1.UpstreamTLS{CASecretRef: &nexov1alpha1.SecretReference{Name: in.subdomain()}}
	}
	if in.Next()%4 == 0 {
		proxy.Spec.LocalAccess = &nexov1alpha1.LocalAccess{Enabled: true, NodePort: ptr.To(int32(in.upTo(30000, 32767)))}
	}

	profile := &nexov1alpha1.NexoDeploymentProfile{}
	profile.Name, profile.Namespace = in.label(30), proxy.Namespace
	profile.Spec.Images = nexov1alpha1.RuntimeImages{Ingress: in.image(), Egress: in.image()}
	profile.Spec.DrainTimeoutSeconds = int32(in.upTo(0, 3600))
	profile.Spec.ProgressDeadlineSeconds = int32(in.upTo(1, 3600))
	if in.Next()%2 == 0 {
		profile.Spec.Defaults.Replicas = int32(in.upTo(1, 100))
	}
	for i := in.Next() % 3; i > 0; i-- {
		profile.Spec.ImagePullSecrets = append(profile.Spec.ImagePullSecrets, nexov1alpha1.SecretReference{Name: in.subdomain()})
	}

	g := &render.Graph{Proxy: proxy, Pipeline: &nexov1alpha1.NexoPipeline{}, Profile: profile, OperatorNamespace: "nexo-system"}
	component := func(slot catalog.Slot) *render.Component {
		var choices []catalog.Kind
		for _, k := range catalog.Kinds {
			if k.Support == catalog.Reconciled && k.AllowedIn(slot) {
				choices = append(choices, k)
			}
		}
		if len(choices) == 0 {
			return nil
		}
		k := choices[in.Next()%len(choices)]
		o, err := scheme.New(nexov1alpha1.GroupVersion.WithKind(k.Kind))
		if err != nil {
			panic(err) // the catalog names a kind the API package does not have: a build error
		}
		if in.Next()%2 == 0 && !slices.ContainsFunc(profile.Spec.StepCatalog, func(s nexov1alpha1.StepImage) bool { return s.Kind == k.Kind }) {
			// stepCatalog is a map keyed by kind: one image per kind.
			profile.Spec.StepCatalog = append(profile.Spec.StepCatalog, nexov1alpha1.StepImage{Kind: k.Kind, Image: in.image()})
		}
		return &render.Component{Kind: k.Kind, Name: in.subdomain(), Slot: slot, Spec: specOf(o)}
	}
	if in.Next()%2 == 0 {
		g.Router = component(catalog.SlotRouter)
	}
	for i := in.Next() % 7; i > 0; i-- {
		slot := []catalog.Slot{catalog.SlotRequest, catalog.SlotResponse, catalog.SlotConnection}[in.Next()%3]
		if c := component(slot); c != nil {
			g.Steps = append(g.Steps, *c)
		}
	}
	if in.Next()%3 == 0 {
		if c := component(catalog.SlotObservability); c != nil {
			g.Observability = append(g.Observability, *c)
		}
	}
	if in.Next()%3 == 0 {
		// The CRD keeps NexoMetrics off the MongoDB port 27017 (not off the proxy's own port).
		port := int32(in.upTo(1024, 65535))
		if port == 27017 {
			port = 9216
		}
		if port == proxy.Spec.Port { // the operator refuses that graph (PortConflict)
			port++
		}
		g.Metrics = &nexov1alpha1.NexoMetricsSpec{Port: port, Path: "/metrics"}
		g.Observability = append(g.Observability, render.Component{Kind: "NexoMetrics", Name: in.subdomain(), Slot: catalog.SlotObservability, Spec: *g.Metrics})
	}
	return g
}

// specOf is the (zero) spec of a typed Nexo object, as resolution hands it to the renderers.
func specOf(o runtime.Object) any {
	return reflect.ValueOf(o).Elem().FieldByName("Spec").Interface()
}

// Objects renders everything the operator writes for g: the revision's ConfigMaps, a copy of
// each pull Secret (from a registry credential of that name), the Deployment and the Service.
func Objects(g *render.Graph) []client.Object {
	var out []client.Object
	rev := render.Revision(g)
	for _, cm := range render.ConfigMaps(g, rev) {
		out = append(out, cm)
	}
	for _, s := range g.Profile.Spec.ImagePullSecrets {
		src := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: g.OperatorNamespace}, Type: corev1.SecretTypeDockerConfigJson,
			Data: map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{}}`)}}
		out = append(out, render.PullSecret(g, src))
	}
	return append(out, render.Deployment(g, render.ConfigHash(render.ConfigData(g, rev), nil), rev), render.Service(g))
}
