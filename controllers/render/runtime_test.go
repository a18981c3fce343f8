package render_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/catalog"
	"github.com/nexo-io/nexo-edge/controllers/render"
)

// mounted is, per container, each Secret it mounts and the keys projected ("*": every key).
type mounted map[string]map[string]string

func mountsOf(t *testing.T, spec corev1.PodSpec) mounted {
	t.Helper()
	out := mounted{}
	for _, c := range spec.Containers {
		for _, m := range c.VolumeMounts {
			i := slices.IndexFunc(spec.Volumes, func(v corev1.Volume) bool { return v.Name == m.Name })
			if i < 0 {
				t.Fatalf("container %s mounts volume %s, which the pod does not have", c.Name, m.Name)
			}
			v := spec.Volumes[i]
			if v.Secret == nil {
				continue
			}
			if !m.ReadOnly || m.MountPath != render.SecretsMountPath+"/"+v.Secret.SecretName {
				t.Errorf("container %s mounts Secret %s at %s (read-only %v), want read-only at %s/<name>", c.Name, v.Secret.SecretName, m.MountPath, m.ReadOnly, render.SecretsMountPath)
			}
			keys := "*"
			if len(v.Secret.Items) > 0 {
				var ks []string
				for _, it := range v.Secret.Items {
					if it.Path != it.Key {
						t.Errorf("Secret %s key %s projected to %s, want its own name", v.Secret.SecretName, it.Key, it.Path)
					}
					ks = append(ks, it.Key)
				}
				keys = strings.Join(ks, ",")
			}
			if out[c.Name] == nil {
				out[c.Name] = map[string]string{}
			}
			out[c.Name][v.Secret.SecretName] = keys
		}
	}
	return out
}

// files is what the rendered config says of each Secret: container → Secret → keys, from every
// SecretFiles of routing.json and steps.json.
func files(t *testing.T, g *render.Graph) mounted {
	t.Helper()
	out := mounted{}
	add := func(fs []render.SecretFiles) {
		for _, f := range fs {
			if f.Dir != render.SecretsMountPath+"/"+f.Secret {
				t.Errorf("config names %s for Secret %s", f.Dir, f.Secret)
			}
			if out[f.Container] == nil {
				out[f.Container] = map[string]string{}
			}
			keys := "*"
			if len(f.Keys) > 0 {
				keys = strings.Join(f.Keys, ",")
			}
			if prev, ok := out[f.Container][f.Secret]; ok && prev != keys {
				keys = prev + "," + keys
			}
			out[f.Container][f.Secret] = keys
		}
	}
	rc, sc := render.Routing(g), render.Steps(g)
	add(rc.Secrets)
	if rc.Router != nil {
		add(rc.Router.Secrets)
	}
	for _, c := range append(sc.Steps, sc.Observability...) {
		add(c.Secrets)
	}
	return out
}

func component(kind, name string, slot catalog.Slot, obj any) render.Component {
	spec := reflect.ValueOf(obj).Elem().FieldByName("Spec").Interface()
	return render.Component{Kind: kind, Name: name, Slot: slot, Spec: spec, SecretUses: nexov1alpha1.SecretUsesOf(obj)}
}

func plainGraph() *render.Graph {
	return &render.Graph{
		Proxy: &nexov1alpha1.NexoProxy{
			ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "shop"},
			Spec:       nexov1alpha1.NexoProxySpec{Upstream: nexov1alpha1.Target{Name: "primary", Address: "mongo:27017"}},
		},
		Pipeline: &nexov1alpha1.NexoPipeline{},
		Profile: &nexov1alpha1.NexoDeploymentProfile{Spec: nexov1alpha1.NexoDeploymentProfileSpec{
			Images: nexov1alpha1.RuntimeImages{Ingress: "r/ingress:1", Egress: "r/egress:1"}, DrainTimeoutSeconds: 30,
		}},
	}
}

func caTLS(secret string) *nexov1alpha1.UpstreamTLS {
	return &nexov1alpha1.UpstreamTLS{CASecretRef: &nexov1alpha1.SecretReference{Name: secret}}
}

// Every kind that names a Secret: the Secret reaches exactly the container that reads it,
// projected to the keys it reads, and the rendered config names the same files there.
func TestSecretsReachOnlyTheContainerThatReadsThem(t *testing.T) {
	auth := &nexov1alpha1.NexoAuthPolicy{Spec: nexov1alpha1.NexoAuthPolicySpec{Mappings: []nexov1alpha1.CredentialMapping{
		{Username: "app", CredentialsSecretRef: nexov1alpha1.SecretReference{Name: "app-creds"}},
	}}}
	pii := &nexov1alpha1.NexoPIIMasking{Spec: nexov1alpha1.NexoPIIMaskingSpec{HashSaltSecretRef: &nexov1alpha1.SecretKeyReference{Name: "salt", Key: "pepper"}}}
	for _, c := range []struct {
		name  string
		setup func(g *render.Graph)
		want  mounted
	}{
		{"nothing referenced", func(*render.Graph) {}, mounted{}},
		{"NexoProxy: serving certificate and client CA to ingress, upstream CA to egress", func(g *render.Graph) {
			g.Proxy.Spec.TLS = &nexov1alpha1.ProxyTLS{SecretRef: nexov1alpha1.SecretReference{Name: "serving"}, ClientCASecretRef: &nexov1alpha1.SecretReference{Name: "clients"}}
			g.Proxy.Spec.Upstream.TLS = caTLS("upstream-ca")
		}, mounted{"ingress": {"serving": "tls.crt,tls.key", "clients": "ca.crt"}, "egress": {"upstream-ca": "ca.crt"}}},
		{"NexoRouter: target CAs to egress", func(g *render.Graph) {
			c := component("NexoRouter", "rt", catalog.SlotRouter, &nexov1alpha1.NexoRouter{Spec: nexov1alpha1.NexoRouterSpec{Targets: []nexov1alpha1.Target{
				{Name: "a", Address: "a:27017", TLS: caTLS("a-ca")}, {Name: "b", Address: "b:27017"},
			}}})
			g.Router = &c
		}, mounted{"egress": {"a-ca": "ca.crt"}}},
		{"NexoTrafficSplit: target CAs to egress", func(g *render.Graph) {
			c := component("NexoTrafficSplit", "split", catalog.SlotRouter, &nexov1alpha1.NexoTrafficSplit{Spec: nexov1alpha1.NexoTrafficSplitSpec{Targets: []nexov1alpha1.WeightedTarget{
				{Target: nexov1alpha1.Target{Name: "a", Address: "a:27017", TLS: caTLS("split-ca")}, Weight: 100},
			}}})
			g.Router = &c
		}, mounted{"egress": {"split-ca": "ca.crt"}}},
		{"NexoAuthPolicy in ingress: the credentials to egress, which logs in upstream", func(g *render.Graph) {
			g.Steps = []render.Component{component("NexoAuthPolicy", "auth", catalog.SlotRequest, auth)}
		}, mounted{"egress": {"app-creds": "username,password"}}},
		{"NexoAuthPolicy in its own container: the credentials still to egress only", func(g *render.Graph) {
			g.Steps = []render.Component{component("NexoAuthPolicy", "auth", catalog.SlotRequest, auth)}
			g.Profile.Spec.StepCatalog = []nexov1alpha1.StepImage{{Kind: "NexoAuthPolicy", Image: "r/auth:1"}}
		}, mounted{"egress": {"app-creds": "username,password"}}},
		{"NexoPIIMasking in egress: the salt key to egress", func(g *render.Graph) {
			g.Steps = []render.Component{component("NexoPIIMasking", "pii", catalog.SlotResponse, pii)}
		}, mounted{"egress": {"salt": "pepper"}}},
		{"NexoPIIMasking in its own container: the salt key to that container only", func(g *render.Graph) {
			g.Steps = []render.Component{component("NexoPIIMasking", "pii", catalog.SlotResponse, pii)}
			g.Profile.Spec.StepCatalog = []nexov1alpha1.StepImage{{Kind: "NexoPIIMasking", Image: "r/pii:1"}}
		}, mounted{"step-piimasking": {"salt": "pepper"}}},
		{"NexoTracing: every header key to ingress", func(g *render.Graph) {
			g.Observability = []render.Component{component("NexoTracing", "tr", catalog.SlotObservability, &nexov1alpha1.NexoTracing{Spec: nexov1alpha1.NexoTracingSpec{
				Endpoint: "http://otel:4317", HeadersSecretRef: &nexov1alpha1.SecretReference{Name: "otel-headers"}}})}
		}, mounted{"ingress": {"otel-headers": "*"}}},
		{"NexoAuditLog: the token key to ingress", func(g *render.Graph) {
			a := &nexov1alpha1.NexoAuditLog{}
			a.Spec.Sink.AuthSecretRef = &nexov1alpha1.SecretKeyReference{Name: "audit", Key: "token"}
			g.Observability = []render.Component{component("NexoAuditLog", "au", catalog.SlotObservability, a)}
		}, mounted{"ingress": {"audit": "token"}}},
		{"one Secret read by two containers: each gets its own keys", func(g *render.Graph) {
			g.Proxy.Spec.TLS = &nexov1alpha1.ProxyTLS{SecretRef: nexov1alpha1.SecretReference{Name: "shared"}}
			g.Proxy.Spec.Upstream.TLS = caTLS("shared")
		}, mounted{"ingress": {"shared": "tls.crt,tls.key"}, "egress": {"shared": "ca.crt"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := plainGraph()
			c.setup(g)
			d := render.Deployment(g, "hash", "rev")
			got := mountsOf(t, d.Spec.Template.Spec)
			if !reflect.DeepEqual(got, c.want) {
				t.Errorf("mounted %v, want %v", got, c.want)
			}
			if cfg := files(t, g); !reflect.DeepEqual(cfg, c.want) {
				t.Errorf("the config names %v, want %v", cfg, c.want)
			}
			// Volume names are DNS labels, one per container and Secret.
			names := map[string]bool{}
			for _, v := range d.Spec.Template.Spec.Volumes {
				if names[v.Name] || len(v.Name) > 63 {
					t.Errorf("volume name %q repeated or too long", v.Name)
				}
				names[v.Name] = true
			}
		})
	}
}

// The config names the serving certificate's files where ingress has them.
func TestRoutingNamesTheTLSFiles(t *testing.T) {
	g := plainGraph()
	g.Proxy.Spec.TLS = &nexov1alpha1.ProxyTLS{SecretRef: nexov1alpha1.SecretReference{Name: "serving"}, ClientCASecretRef: &nexov1alpha1.SecretReference{Name: "clients"}}
	tls := render.Routing(g).TLS
	want := render.TLSConfig{CertFile: "/etc/nexo/secrets/serving/tls.crt", KeyFile: "/etc/nexo/secrets/serving/tls.key", ClientCAFile: "/etc/nexo/secrets/clients/ca.crt"}
	if tls == nil || *tls != want {
		t.Errorf("routing.json tls %+v, want %+v", tls, want)
	}
	if render.Routing(plainGraph()).TLS != nil {
		t.Error("a proxy without TLS has tls files")
	}
}

// Drain: every container waits PreStopSeconds on its preStop hook, the config carries the
// profile's drain timeout, and the grace period covers both.
func TestDrainReachesTheProxy(t *testing.T) {
	g := graph()
	d := render.Deployment(g, "hash", "rev")
	grace := *d.Spec.Template.Spec.TerminationGracePeriodSeconds
	if grace < int64(render.PreStopSeconds)+45+1 {
		t.Errorf("grace period %d does not cover the preStop wait %d and the drain timeout 45", grace, render.PreStopSeconds)
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil || c.Lifecycle.PreStop.Sleep.Seconds != render.PreStopSeconds {
			t.Errorf("container %s: preStop %+v, want a %ds sleep", c.Name, c.Lifecycle, render.PreStopSeconds)
		}
	}
	drain := render.Routing(g).Drain
	if drain.TimeoutSeconds != 45 || drain.PreStopSeconds != render.PreStopSeconds || drain.GracePeriodSeconds != grace {
		t.Errorf("routing.json drain %+v, want timeout 45, preStop %d, grace %d", drain, render.PreStopSeconds, grace)
	}
	var routing render.RoutingConfig
	for name, data := range render.ConfigData(g, "rev") {
		if strings.Contains(name, "-routing-") {
			if err := json.Unmarshal([]byte(data["routing.json"]), &routing); err != nil {
				t.Fatal(err)
			}
		}
	}
	if routing.Drain != drain || routing.ContractVersion != render.ContractVersion {
		t.Errorf("routing.json as written: drain %+v, contract %q", routing.Drain, routing.ContractVersion)
	}
}

// Step containers: resources from their catalog entry, else the profile's defaults (never the
// proxy's own, which are ingress's and egress's); a port of their own with readiness and
// liveness probes on it; the restricted security context; and the config says where each step
// runs and how to reach it.
func TestStepContainers(t *testing.T) {
	g := graph()
	small := corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m")}}
	defaults := corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m")}}
	own := corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}
	g.Profile.Spec.StepCatalog[0].Resources = &small // NexoPIIMasking
	g.Profile.Spec.Defaults.Resources = &defaults
	g.Proxy.Spec.Resources = &own
	d := render.Deployment(g, "hash", "rev")
	containers := map[string]corev1.Container{}
	for _, c := range d.Spec.Template.Spec.Containers {
		containers[c.Name] = c
	}
	for name, want := range map[string]string{"ingress": "1", "egress": "1", "step-tenantisolation": "200m", "step-piimasking": "50m"} {
		c := containers[name]
		if got := c.Resources.Requests.Cpu().String(); got != want {
			t.Errorf("%s requests cpu %s, want %s", name, got, want)
		}
	}
	steps := render.Steps(g).Steps
	ports := map[int32]string{}
	for _, name := range []string{"step-tenantisolation", "step-piimasking"} {
		c := containers[name]
		if len(c.Ports) != 1 || c.ReadinessProbe == nil || c.ReadinessProbe.TCPSocket == nil || c.ReadinessProbe.TCPSocket.Port.IntValue() != int(c.Ports[0].ContainerPort) || c.LivenessProbe == nil {
			t.Fatalf("%s: ports %v, readiness %+v: want one port and probes on it", name, c.Ports, c.ReadinessProbe)
		}
		p := c.Ports[0].ContainerPort
		if other, dup := ports[p]; dup || p < render.FirstStepPort || p >= render.FirstStepPort+render.MaxStepContainers {
			t.Errorf("%s listens on %d (also %s)", name, p, other)
		}
		ports[p] = name
		if !slices.Contains(c.Args, fmt.Sprintf("--listen=:%d", p)) || !slices.Contains(c.Args, "--config="+render.ConfigMountPath) {
			t.Errorf("%s args %v", name, c.Args)
		}
		i := slices.IndexFunc(steps, func(s render.ComponentConfig) bool { return s.Container == name })
		if i < 0 || steps[i].Address != fmt.Sprintf("127.0.0.1:%d", p) {
			t.Errorf("steps.json does not say %s runs in %s at port %d: %+v", steps[i].Kind, name, p, steps)
		}
	}
	// NexoRateLimit has no catalog image: a request step, run by ingress.
	if i := slices.IndexFunc(steps, func(s render.ComponentConfig) bool { return s.Kind == "NexoRateLimit" }); steps[i].Container != "ingress" || steps[i].Address != "" {
		t.Errorf("NexoRateLimit runs in %q at %q, want ingress", steps[i].Container, steps[i].Address)
	}
	if got := slices.Sorted(maps.Keys(ports)); len(got) != 2 {
		t.Errorf("step ports %v", got)
	}
}
