package render

import (
	"crypto/sha256"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/contract/wire"
)

// Labels and annotations on generated objects.
const (
	ManagedByLabel   = "app.kubernetes.io/managed-by"
	ManagedByValue   = "nexo-operator"
	ConfigHashKey    = "nexo.io/config-hash"
	GraphRevisionKey = "nexo.io/graph-revision"
)

// RoutingName and StepsName are the ConfigMap names of a proxy's graph revision: each revision's
// config is its own immutable pair, which the pod template names, so pods of an older
// ReplicaSet keep reading their revision's config until they are replaced.
func RoutingName(proxy, revision string) string { return proxy + "-routing-" + revision }

// StepsName is the steps ConfigMap name of a proxy's graph revision.
func StepsName(proxy, revision string) string { return proxy + "-steps-" + revision }

// ConfigRevision is the graph revision a config ConfigMap of proxy belongs to, from its name
// ("" when the name is not one of the proxy's config ConfigMaps).
func ConfigRevision(proxy, name string) string {
	for _, prefix := range []string{proxy + "-routing-", proxy + "-steps-"} {
		if rev, ok := strings.CutPrefix(name, prefix); ok && rev != "" && !strings.Contains(rev, "-") {
			return rev
		}
	}
	return ""
}

// RevisionHistoryLimit is how many old ReplicaSets a proxy's Deployment keeps: one, the
// previous revision, whose config the operator keeps too (so `kubectl rollout undo` finds it).
const RevisionHistoryLimit = 1

// PullSecretName is the name of a proxy's copy of a profile pull Secret: <proxy>-pull-<source>,
// or, when that would exceed the 253 characters of a Secret name (a 63-character proxy and a
// long source; found by FuzzRender), <proxy>-pull-<start of source>-<10 hex of its sha256>:
// still one name per source, the same on every pass, and starting with <proxy>-pull-.
func PullSecretName(proxy, source string) string {
	name := proxy + "-pull-" + source
	if len(name) <= validation.DNS1123SubdomainMaxLength {
		return name
	}
	sum := sha256.Sum256([]byte(source))
	suffix := fmt.Sprintf("-%x", sum[:5])
	keep := validation.DNS1123SubdomainMaxLength - len(proxy) - len("-pull-") - len(suffix)
	return proxy + "-pull-" + strings.TrimRight(source[:keep], "-.") + suffix
}

// Labels selects a proxy's generated objects and pods.
func Labels(proxy string) map[string]string {
	return map[string]string{
		"app.kubernetes.io/name":     "nexo-proxy",
		"app.kubernetes.io/instance": proxy,
		ManagedByLabel:               ManagedByValue,
		wire.ProxyLabel:              proxy,
	}
}

func meta(g *Graph, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: g.Proxy.Namespace, Labels: Labels(g.Proxy.Name)}
}

// ConfigData renders the data of the routing and steps ConfigMaps of a graph revision, keyed by
// ConfigMap name: routing.json (RoutingConfig) and steps.json (StepsConfig).
func ConfigData(g *Graph, revision string) map[string]map[string]string {
	return map[string]map[string]string{
		RoutingName(g.Proxy.Name, revision): {"routing.json": string(mustJSON(Routing(g)))},
		StepsName(g.Proxy.Name, revision):   {"steps.json": string(mustJSON(Steps(g)))},
	}
}

// ConfigMaps renders the routing and steps ConfigMaps of a graph revision: immutable (the
// API server refuses any change of their data, and kubelets stop watching them).
func ConfigMaps(g *Graph, revision string) []*corev1.ConfigMap {
	data := ConfigData(g, revision)
	out := make([]*corev1.ConfigMap, 0, len(data))
	for _, name := range sortedKeys(data) {
		cm := &corev1.ConfigMap{ObjectMeta: meta(g, name), Data: data[name], Immutable: ptr.To(true)}
		out = append(out, cm)
	}
	return out
}

// StepImages lists, in pipeline order and once per kind, the step kinds used by the graph that
// the profile's catalog gives an image for.
func StepImages(g *Graph) []nexov1alpha1.StepImage {
	var out []nexov1alpha1.StepImage
	for _, s := range g.Steps {
		if slices.ContainsFunc(out, func(si nexov1alpha1.StepImage) bool { return si.Kind == s.Kind }) {
			continue
		}
		for _, entry := range g.Profile.Spec.StepCatalog {
			if entry.Kind == s.Kind {
				out = append(out, entry)
			}
		}
	}
	return out
}

// Replicas is the proxy's replica count: its own, else the profile default, else 1.
func Replicas(g *Graph) int32 {
	if g.Proxy.Spec.Replicas != nil {
		return *g.Proxy.Spec.Replicas
	}
	if g.Profile.Spec.Defaults.Replicas > 0 {
		return g.Profile.Spec.Defaults.Replicas
	}
	return 1
}

func port(g *Graph) int32 {
	if g.Proxy.Spec.Port == 0 {
		return 27017
	}
	return g.Proxy.Spec.Port
}

func restricted() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		RunAsNonRoot:             ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

func tcpProbe(p int32, initial int32) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler:        corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(p)}},
		InitialDelaySeconds: initial, PeriodSeconds: 10, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3,
	}
}

// Deployment renders the proxy Deployment (docs/runtime.md); configHash and revision go on the
// pod template so pods roll when either changes.
func Deployment(g *Graph, configHash, revision string) *appsv1.Deployment {
	name := g.Proxy.Name
	labels := Labels(name)
	ingressImage, egressImage := string(g.Profile.Spec.Images.Ingress), string(g.Profile.Spec.Images.Egress)
	if g.Proxy.Spec.ProxyImage != "" {
		ingressImage, egressImage = string(g.Proxy.Spec.ProxyImage), string(g.Proxy.Spec.ProxyImage)
	}
	defaults := corev1.ResourceRequirements{}
	if g.Profile.Spec.Defaults.Resources != nil {
		defaults = *g.Profile.Spec.Defaults.Resources
	}
	resources := defaults
	if g.Proxy.Spec.Resources != nil {
		resources = *g.Proxy.Spec.Resources
	}
	volumes := []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		Sources: []corev1.VolumeProjection{
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: RoutingName(name, revision)}}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: StepsName(name, revision)}}},
		},
	}}}}
	// Every container reads the config; each Secret goes to the containers that read it, with
	// only the keys they read.
	mounts := map[string][]corev1.VolumeMount{}
	configMount := corev1.VolumeMount{Name: "config", MountPath: ConfigMountPath, ReadOnly: true}
	for _, m := range secretMounts(g) {
		vol := secretVolumeName(m.container, m.secret)
		src := &corev1.SecretVolumeSource{SecretName: m.secret}
		for _, k := range m.keys {
			src.Items = append(src.Items, corev1.KeyToPath{Key: k, Path: k})
		}
		volumes = append(volumes, corev1.Volume{Name: vol, VolumeSource: corev1.VolumeSource{Secret: src}})
		mounts[m.container] = append(mounts[m.container], corev1.VolumeMount{Name: vol, MountPath: SecretsMountPath + "/" + m.secret, ReadOnly: true})
	}
	container := func(name, image string, args []string, ports []corev1.ContainerPort, res corev1.ResourceRequirements) corev1.Container {
		return corev1.Container{
			Name: name, Image: image, Args: args, Ports: ports, Resources: res,
			VolumeMounts:    append([]corev1.VolumeMount{configMount}, mounts[name]...),
			SecurityContext: restricted(),
			ReadinessProbe:  tcpProbe(ports[0].ContainerPort, 2), LivenessProbe: tcpProbe(ports[0].ContainerPort, 10),
			Lifecycle: &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: PreStopSeconds}}},
		}
	}
	ingressPorts := []corev1.ContainerPort{{Name: "mongodb", ContainerPort: port(g), Protocol: corev1.ProtocolTCP}}
	if g.Metrics != nil {
		ingressPorts = append(ingressPorts, corev1.ContainerPort{Name: "metrics", ContainerPort: g.Metrics.Port, Protocol: corev1.ProtocolTCP})
	}
	containers := []corev1.Container{
		container(IngressContainer, ingressImage, []string{"ingress", "--config=" + ConfigMountPath}, ingressPorts, resources),
		container(EgressContainer, egressImage, []string{"egress", "--config=" + ConfigMountPath},
			[]corev1.ContainerPort{{Name: "egress-admin", ContainerPort: EgressAdminPort, Protocol: corev1.ProtocolTCP}}, resources),
	}
	for i, s := range stepContainers(g) {
		res := defaults
		if s.Resources != nil {
			res = *s.Resources
		}
		containers = append(containers, container(s.name, string(s.Image),
			[]string{"step", "--kind=" + s.Kind, "--config=" + ConfigMountPath, fmt.Sprintf("--listen=:%d", s.port)},
			[]corev1.ContainerPort{{Name: fmt.Sprintf("step-%d", i), ContainerPort: s.port, Protocol: corev1.ProtocolTCP}}, res))
	}
	var pullSecrets []corev1.LocalObjectReference
	for _, s := range g.Profile.Spec.ImagePullSecrets {
		pullSecrets = append(pullSecrets, corev1.LocalObjectReference{Name: PullSecretName(name, s.Name)})
	}
	deadline := g.Profile.Spec.ProgressDeadlineSeconds
	if deadline == 0 {
		deadline = 600
	}
	dep := &appsv1.Deployment{
		ObjectMeta: meta(g, name),
		Spec: appsv1.DeploymentSpec{
			Replicas:                ptr.To(Replicas(g)),
			RevisionHistoryLimit:    ptr.To(int32(RevisionHistoryLimit)),
			ProgressDeadlineSeconds: ptr.To(deadline),
			Selector:                &metav1.LabelSelector{MatchLabels: map[string]string{wire.ProxyLabel: name}},
			Strategy: appsv1.DeploymentStrategy{
				Type: appsv1.RollingUpdateDeploymentStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDeployment{
					MaxUnavailable: ptr.To(intstr.FromInt32(0)), MaxSurge: ptr.To(intstr.FromInt32(1)),
				},
			},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{
					Labels:      labels,
					Annotations: map[string]string{ConfigHashKey: configHash, GraphRevisionKey: revision},
				},
				Spec: corev1.PodSpec{
					Containers:                    containers,
					Volumes:                       volumes,
					ImagePullSecrets:              pullSecrets,
					TerminationGracePeriodSeconds: ptr.To(gracePeriod(g)),
					AutomountServiceAccountToken:  ptr.To(false),
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot:   ptr.To(true),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
				},
			},
		},
	}
	return dep
}

// stepContainerName is "step-" plus the kind without its Nexo prefix, lowercased.
func stepContainerName(kind string) string {
	b := []byte{}
	for _, r := range kind[len("Nexo"):] {
		if r >= 'A' && r <= 'Z' {
			r += 'a' - 'A'
		}
		b = append(b, byte(r))
	}
	return "step-" + string(b)
}

// Service renders the proxy Service: ClusterIP, or NodePort with the fixed node port when the
// proxy asks for local access; a metrics port when a NexoMetrics is attached.
func Service(g *Graph) *corev1.Service {
	svc := &corev1.Service{
		ObjectMeta: meta(g, g.Proxy.Name),
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: map[string]string{wire.ProxyLabel: g.Proxy.Name},
			Ports: []corev1.ServicePort{{
				Name: "mongodb", Port: port(g), TargetPort: intstr.FromString("mongodb"), Protocol: corev1.ProtocolTCP,
			}},
		},
	}
	if la := g.Proxy.Spec.LocalAccess; la != nil && la.Enabled && la.NodePort != nil {
		svc.Spec.Type = corev1.ServiceTypeNodePort
		svc.Spec.Ports[0].NodePort = *la.NodePort
	}
	if g.Metrics != nil {
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{
			Name: "metrics", Port: g.Metrics.Port, TargetPort: intstr.FromString("metrics"), Protocol: corev1.ProtocolTCP,
		})
	}
	return svc
}

// CopiedFromKey names the source of a pull-Secret copy.
const CopiedFromKey = "nexo.io/copied-from"

// ShareableRegistryType reports whether a Secret type is a registry credential.
func ShareableRegistryType(t corev1.SecretType) bool {
	return t == corev1.SecretTypeDockerConfigJson || t == corev1.SecretTypeDockercfg
}

// PullSecret renders a proxy's copy of a profile pull Secret from the operator namespace.
func PullSecret(g *Graph, source *corev1.Secret) *corev1.Secret {
	m := meta(g, PullSecretName(g.Proxy.Name, source.Name))
	m.Annotations = map[string]string{CopiedFromKey: fmt.Sprintf("%s/%s", source.Namespace, source.Name)}
	return &corev1.Secret{ObjectMeta: m, Type: source.Type, Data: source.Data}
}
