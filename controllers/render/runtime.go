package render

import (
	"crypto/sha256"
	"fmt"
	"slices"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/catalog"
)

// The runtime contract: what each container of a proxy pod receives (docs/runtime.md). The
// rendered config files are typed here (RoutingConfig, StepsConfig), so their JSON Schema is
// generated from these types (make generate writes docs/runtime/*.schema.json).

// ContractVersion names this layout of the pod and of its config files. It is part of every
// graph revision (Revision), so a build that renders another layout gives every proxy a new
// revision, and new immutable config, instead of rewriting a revision's config in place.
const ContractVersion = "nexo.io/runtime/v1"

// Containers of every proxy pod; each step kind the profile's catalog gives an image adds
// "step-<kind without Nexo, lowercased>".
const (
	IngressContainer = "ingress"
	EgressContainer  = "egress"
)

// Paths and ports of the contract.
const (
	// ConfigMountPath holds routing.json and steps.json, in every container.
	ConfigMountPath = "/etc/nexo/config"
	// SecretsMountPath holds, in the container that reads it, each Secret at <name>/<key>, with
	// only the keys that container reads.
	SecretsMountPath = "/etc/nexo/secrets"
	// EgressAdminPort is egress's readiness port, where ingress reaches it.
	EgressAdminPort int32 = 27018
	// FirstStepPort is the port of the first step container; the nth (from 0) listens on
	// FirstStepPort+n, at most MaxStepContainers of them.
	FirstStepPort     int32 = 27100
	MaxStepContainers       = 32
	// PreStopSeconds is how long every container waits, on its preStop hook, before it is sent
	// SIGTERM: the time endpoints (Services, load balancers) take to stop sending new connections
	// to a terminating pod. Readiness is not the drain signal: SIGTERM is.
	PreStopSeconds = 5
	// drainMarginSeconds is what the grace period adds to the preStop wait and the drain timeout
	// before the kubelet sends SIGKILL.
	drainMarginSeconds = 15
)

// RoutingConfig is routing.json: how the pod accepts clients, reaches the upstream and drains.
type RoutingConfig struct {
	// ContractVersion is the version of this contract, nexo.io/runtime/v1; a container refuses a
	// version it does not know.
	ContractVersion string `json:"contractVersion"`
	// ListenPort is the MongoDB wire-protocol port ingress listens on.
	ListenPort int32 `json:"listenPort"`
	// Upstream is the proxy's upstream (NexoProxy spec.upstream), which egress connects to.
	Upstream nexov1alpha1.Target `json:"upstream"`
	// TLS, when present, is the serving certificate ingress terminates client TLS with.
	TLS *TLSConfig `json:"tls,omitempty"`
	// Router routes operations to named upstream targets (absent: every operation goes to
	// Upstream).
	Router *ComponentConfig `json:"router,omitempty"`
	// EgressAddress is where ingress reaches egress inside the pod.
	EgressAddress string `json:"egressAddress"`
	// Drain is the stop sequence every container follows.
	Drain DrainConfig `json:"drain"`
	// Secrets are the Secrets the NexoProxy itself references (serving certificate, client CA,
	// upstream CA), each in the one container that reads it.
	Secrets []SecretFiles `json:"secrets,omitempty"`
}

// TLSConfig names ingress's serving certificate files.
type TLSConfig struct {
	CertFile string `json:"certFile"`
	KeyFile  string `json:"keyFile"`
	// ClientCAFile, when set, verifies client certificates (mutual TLS).
	ClientCAFile string `json:"clientCAFile,omitempty"`
}

// DrainConfig is the stop sequence: the preStop hook waits PreStopSeconds (endpoints drop the
// pod), then SIGTERM: ingress stops accepting connections and lets admitted commands finish for
// at most TimeoutSeconds; egress and the steps keep serving the pod's own components until then.
// The kubelet sends SIGKILL after GracePeriodSeconds.
type DrainConfig struct {
	PreStopSeconds     int32 `json:"preStopSeconds"`
	TimeoutSeconds     int32 `json:"timeoutSeconds"`
	GracePeriodSeconds int64 `json:"gracePeriodSeconds"`
}

// StepsConfig is steps.json: the pipeline's steps and the observability objects.
type StepsConfig struct {
	// Steps in pipeline order: request, then response, then connection.
	Steps         []ComponentConfig `json:"steps"`
	Observability []ComponentConfig `json:"observability"`
}

// ComponentConfig is one referenced object as its runtime reads it.
type ComponentConfig struct {
	Kind string       `json:"kind"`
	Name string       `json:"name"`
	Slot catalog.Slot `json:"slot"`
	// Spec is the object's spec, as its CRD defines it.
	Spec any `json:"spec"`
	// Container runs it: its own step container, or ingress (request steps, observability) or
	// egress (routing, response and connection steps).
	Container string `json:"container"`
	// Address is where ingress and egress reach its step container (host:port), when it has one.
	Address string `json:"address,omitempty"`
	// Secrets are the Secrets it references, each in the one container that reads it.
	Secrets []SecretFiles `json:"secrets,omitempty"`
}

// SecretFiles says where a referenced Secret's keys are, as files: Dir/<key> in Container,
// and in no other container.
type SecretFiles struct {
	// Field is the reference in its object, for example spec.mappings[0].credentialsSecretRef.
	Field string `json:"field"`
	// Secret is the Secret's name, in the proxy's namespace.
	Secret    string `json:"secret"`
	Container string `json:"container"`
	Dir       string `json:"dir"`
	// Keys are the files in Dir (empty: every key of the Secret, for example exporter headers).
	Keys []string `json:"keys,omitempty"`
}

// stepContainers are the step kinds of the graph that run in their own container, in pipeline
// order, with their ports.
type stepContainer struct {
	nexov1alpha1.StepImage
	name string
	port int32
}

// stepOf is the step container of a kind, when the profile's catalog gives the kind one.
func stepOf(steps []stepContainer, kind string) (stepContainer, bool) {
	i := slices.IndexFunc(steps, func(s stepContainer) bool { return s.Kind == kind })
	if i < 0 {
		return stepContainer{}, false
	}
	return steps[i], true
}

func stepContainers(g *Graph) []stepContainer {
	var out []stepContainer
	for i, s := range StepImages(g) {
		out = append(out, stepContainer{StepImage: s, name: stepContainerName(s.Kind), port: FirstStepPort + int32(i)})
	}
	return out
}

// runsIn is the container that runs a component: its step container when the profile's catalog
// gives its kind an image; else egress for routing, response and connection steps (egress talks
// to the upstream), and ingress for request steps and observability (ingress admits every
// command and answers it).
func runsIn(steps []stepContainer, c Component) string {
	if c.Slot != catalog.SlotRouter && c.Slot != catalog.SlotObservability {
		if s, ok := stepOf(steps, c.Kind); ok {
			return s.name
		}
	}
	switch c.Slot {
	case catalog.SlotRouter, catalog.SlotResponse, catalog.SlotConnection:
		return EgressContainer
	}
	return IngressContainer
}

// readerOf is the container that reads a Secret use of a component running in runner: egress
// for what serves the upstream connection (CAs, the credentials the proxy logs in with),
// wherever the referencing object runs; otherwise the runner itself.
func readerOf(u nexov1alpha1.SecretUse, runner string) string {
	if u.Upstream {
		return EgressContainer
	}
	return runner
}

// proxyReader is the container that reads one of the NexoProxy's own Secrets: ingress for the
// serving certificate and the client CA, egress for the upstream CA.
func proxyReader(u nexov1alpha1.SecretUse) string { return readerOf(u, IngressContainer) }

// secretFiles places the uses of one object read by the containers readerOf picks.
func secretFiles(uses []nexov1alpha1.SecretUse, reader func(nexov1alpha1.SecretUse) string) []SecretFiles {
	var out []SecretFiles
	for _, u := range uses {
		out = append(out, SecretFiles{Field: u.Field, Secret: u.Name, Container: reader(u), Dir: SecretsMountPath + "/" + u.Name, Keys: u.Keys})
	}
	return out
}

// componentConfig is a component as its runtime reads it; steps are the graph's step containers.
func componentConfig(steps []stepContainer, c Component) ComponentConfig {
	runner := runsIn(steps, c)
	cc := ComponentConfig{Kind: c.Kind, Name: c.Name, Slot: c.Slot, Spec: c.Spec, Container: runner,
		Secrets: secretFiles(c.SecretUses, func(u nexov1alpha1.SecretUse) string { return readerOf(u, runner) })}
	if s, ok := stepOf(steps, c.Kind); ok && s.name == runner {
		cc.Address = fmt.Sprintf("127.0.0.1:%d", s.port)
	}
	return cc
}

// Routing renders routing.json.
func Routing(g *Graph) RoutingConfig {
	rc := RoutingConfig{
		ContractVersion: ContractVersion,
		ListenPort:      port(g),
		Upstream:        g.Proxy.Spec.Upstream,
		EgressAddress:   fmt.Sprintf("127.0.0.1:%d", EgressAdminPort),
		Drain:           DrainConfig{PreStopSeconds: PreStopSeconds, TimeoutSeconds: g.Profile.Spec.DrainTimeoutSeconds, GracePeriodSeconds: gracePeriod(g)},
		Secrets:         secretFiles(nexov1alpha1.SecretUsesOf(g.Proxy), proxyReader),
	}
	if g.Router != nil {
		r := componentConfig(stepContainers(g), *g.Router)
		rc.Router = &r
	}
	if tls := g.Proxy.Spec.TLS; tls != nil {
		dir := SecretsMountPath + "/" + tls.SecretRef.Name
		rc.TLS = &TLSConfig{CertFile: dir + "/" + nexov1alpha1.KeyTLSCert, KeyFile: dir + "/" + nexov1alpha1.KeyTLSKey}
		if ca := tls.ClientCASecretRef; ca != nil {
			rc.TLS.ClientCAFile = SecretsMountPath + "/" + ca.Name + "/" + nexov1alpha1.KeyCABundle
		}
	}
	return rc
}

// Steps renders steps.json.
func Steps(g *Graph) StepsConfig {
	sc := StepsConfig{Steps: []ComponentConfig{}, Observability: []ComponentConfig{}}
	steps := stepContainers(g)
	for _, c := range g.Steps {
		sc.Steps = append(sc.Steps, componentConfig(steps, c))
	}
	for _, c := range g.Observability {
		sc.Observability = append(sc.Observability, componentConfig(steps, c))
	}
	return sc
}

// gracePeriod covers the preStop wait, the profile's drain timeout and a margin.
func gracePeriod(g *Graph) int64 {
	return int64(PreStopSeconds) + int64(g.Profile.Spec.DrainTimeoutSeconds) + drainMarginSeconds
}

// secretMount is one Secret in one container: the keys it reads (nil: all).
type secretMount struct {
	container, secret string
	keys              []string
	all               bool
}

// secretMounts lists, per container and Secret, the keys that container reads, in the order the
// config names them (the proxy's own, the router, the steps, observability).
func secretMounts(g *Graph) []secretMount {
	var files []SecretFiles
	rc, sc := Routing(g), Steps(g)
	files = append(files, rc.Secrets...)
	if rc.Router != nil {
		files = append(files, rc.Router.Secrets...)
	}
	for _, c := range append(sc.Steps, sc.Observability...) {
		files = append(files, c.Secrets...)
	}
	var out []secretMount
	for _, f := range files {
		i := slices.IndexFunc(out, func(m secretMount) bool { return m.container == f.Container && m.secret == f.Secret })
		if i < 0 {
			out = append(out, secretMount{container: f.Container, secret: f.Secret})
			i = len(out) - 1
		}
		m := &out[i]
		if len(f.Keys) == 0 {
			m.all, m.keys = true, nil
		}
		for _, k := range f.Keys {
			if !m.all && !slices.Contains(m.keys, k) {
				m.keys = append(m.keys, k)
			}
		}
	}
	return out
}

// secretVolumeName is the volume of one Secret in one container: the container's name and a
// short hash of the Secret's, so it stays a DNS label (63 characters) for any Secret name.
func secretVolumeName(container, secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return fmt.Sprintf("%s-%x", container, sum[:4])
}

// PortClash names a port two of the pod's listeners would share (the proxy's port, the attached
// NexoMetrics, egress's admin port, a step container's port), or "" when there is none.
func PortClash(g *Graph) string {
	type listener struct {
		port int32
		what string
	}
	ls := []listener{{port(g), "the proxy's own port (spec.port)"}, {EgressAdminPort, "egress's admin port"}}
	if g.Metrics != nil {
		ls = append(ls, listener{g.Metrics.Port, "the attached NexoMetrics port"})
	}
	for _, s := range stepContainers(g) {
		ls = append(ls, listener{s.port, "the port of step container " + s.name})
	}
	for i := range ls {
		for j := range i {
			if ls[i].port == ls[j].port {
				return fmt.Sprintf("%s is %d, which is also %s; ports %d and %d to %d are the pod's own (docs/runtime.md)",
					ls[i].what, ls[i].port, ls[j].what, EgressAdminPort, FirstStepPort, FirstStepPort+MaxStepContainers-1)
			}
		}
	}
	return ""
}
