package packaging_test

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/nexo-io/nexo-edge/test/framework/monitoring"
	"github.com/nexo-io/nexo-edge/test/framework/testcluster"
)

// valueCase sets one value and says where it shows: for each rendered document (Kind/name),
// text it must then contain, and documents that must then not render at all. Each text is
// chosen so that it is absent from the default render (checked), so a value that does nothing
// fails its case.
type valueCase struct {
	set  string
	want map[string][]string
	gone []string
}

// valueCases has one case per leaf of values.yaml; TestEveryValueIsRendered fails on a leaf with
// no case, so a new value comes with its assertion.
func valueCases() map[string]valueCase {
	const op, mgr = "Deployment/nexo-operator", "Deployment/nexo-manager"
	c := map[string]valueCase{
		"crds.install":            {set: "crds: {install: true}", want: map[string][]string{"CustomResourceDefinition/nexoproxies.nexo.io": {"helm.sh/resource-policy: keep"}}},
		"environmentID":           {set: "environmentID: 0a1b2c3d4e5f", want: map[string][]string{op: {"--environment-id=0a1b2c3d4e5f"}}},
		"admissionPolicy.enabled": {set: "admissionPolicy: {enabled: false}", gone: []string{"ValidatingAdmissionPolicy/nexo-managed-objects", "ValidatingAdmissionPolicyBinding/nexo-managed-objects-nexo-system"}},
		"imagePullSecrets":        {set: "imagePullSecrets: [regcred]", want: map[string][]string{op: {"- name: regcred"}, mgr: {"- name: regcred"}}},
		"aggregateClusterRoles":   {set: "aggregateClusterRoles: false", gone: []string{"ClusterRole/nexo-edge-view-nexo-system"}},
		"commonLabels":            {set: "commonLabels: {cost-center: c42}", want: map[string][]string{op: {"cost-center: c42"}, "Secret/nexo-trusted-keys": {"cost-center: c42"}}},
		"nameOverride":            {set: "nameOverride: edge", want: map[string][]string{"ClusterRole/edge-view-nexo-system": {"app.kubernetes.io/name: edge"}, "ClusterRole/edge-admin-nexo-system": {"aggregate-to-admin"}}, gone: []string{"ClusterRole/nexo-edge-view-nexo-system"}},
		"fullnameOverride":        {set: "{fullnameOverride: team-edge, networkPolicy: {enabled: true}}", want: map[string][]string{"ClusterRole/team-edge-edit-nexo-system": {"aggregate-to-edit"}, "NetworkPolicy/team-edge": {"kind: NetworkPolicy"}}, gone: []string{"ClusterRole/nexo-edge-edit-nexo-system"}},
		"global":                  {set: "global: {imagePullSecrets: [corp]}", want: map[string][]string{op: {"- name: corp"}, mgr: {"- name: corp"}}},

		"operator.watchNamespaces":                    {set: "operator: {watchNamespaces: [team-a]}", want: map[string][]string{op: {"--watch-namespaces=team-a"}, "RoleBinding/nexo-operator-nexo-system": {"namespace: team-a"}, "ValidatingAdmissionPolicyBinding/nexo-managed-objects-nexo-system": {`nexo.io/admission-namespaces: "team-a"`}}},
		"operator.secretCopyNamespaces":               {set: "operator: {secretCopyNamespaces: [team-b]}", want: map[string][]string{"RoleBinding/nexo-operator-secret-copies-nexo-system": {"namespace: team-b"}}},
		"operator.requireSignatures":                  {set: "operator: {requireSignatures: true}", want: map[string][]string{op: {"--require-signatures=true"}}},
		"operator.trustedKeysSecret":                  {set: "operator: {trustedKeysSecret: cp-keys}", want: map[string][]string{op: {"--trusted-keys-secret=cp-keys"}, mgr: {"--trusted-keys-secret=cp-keys", "secretName: cp-keys"}, "Secret/cp-keys": {"kind: Secret"}}},
		"operator.logLevel":                           {set: "operator: {logLevel: debug}", want: map[string][]string{op: {"--zap-log-level=debug"}}},
		"operator.proxyWorkers":                       {set: "operator: {proxyWorkers: 9}", want: map[string][]string{op: {"--proxy-workers=9"}}},
		"operator.replicas":                           {set: "operator: {replicas: 3}", want: map[string][]string{op: {"replicas: 3", "podAntiAffinity", "topologyKey: kubernetes.io/hostname"}}},
		"operator.leaderElect":                        {set: "operator: {leaderElect: false}", want: map[string][]string{op: {"--leader-elect=false"}}},
		"operator.podDisruptionBudget.enabled":        {set: "operator: {podDisruptionBudget: {enabled: true}}", want: map[string][]string{"PodDisruptionBudget/nexo-operator": {"maxUnavailable: 1"}}},
		"operator.podDisruptionBudget.minAvailable":   {set: "operator: {podDisruptionBudget: {enabled: true, minAvailable: 1, maxUnavailable: \"\"}}", want: map[string][]string{"PodDisruptionBudget/nexo-operator": {"minAvailable: 1"}}},
		"operator.podDisruptionBudget.maxUnavailable": {set: "operator: {podDisruptionBudget: {enabled: true, maxUnavailable: 2}}", want: map[string][]string{"PodDisruptionBudget/nexo-operator": {"maxUnavailable: 2"}}},

		"manager.enabled":          {set: "manager: {enabled: false}", gone: []string{mgr, "Role/nexo-manager"}},
		"manager.controlPlaneURL":  {set: "manager: {controlPlaneURL: https://cp.nexo.test}", want: map[string][]string{mgr: {"--control-plane-url=https://cp.nexo.test"}}},
		"manager.proxyImage":       {set: "manager: {proxyImage: registry.test/proxy:9}", want: map[string][]string{mgr: {"--proxy-image=registry.test/proxy:9"}}},
		"manager.ownerID":          {set: "manager: {ownerID: prod-eu}", want: map[string][]string{mgr: {"--owner-id=prod-eu"}}},
		"manager.deployNamespaces": {set: "manager: {deployNamespaces: [shop, payments]}", want: map[string][]string{mgr: {"--deploy-namespaces=shop,payments"}}},
		"manager.allowedImageRepositories": {set: "manager: {allowedImageRepositories: [registry.test/nexo/proxy]}",
			want: map[string][]string{mgr: {"--allowed-image-repositories=registry.test/nexo/proxy"}}},
		"manager.connectTokenSecret": {set: "manager: {connectTokenSecret: my-token}", want: map[string][]string{mgr: {"secretName: my-token"}}},

		"metrics.secure":  {set: "metrics: {secure: false}", want: map[string][]string{op: {"--metrics-secure=false"}}, gone: []string{"ClusterRole/nexo-operator-metrics-reader-nexo-system"}},
		"metrics.readers": {set: "metrics: {readers: [{kind: ServiceAccount, name: prometheus-k8s, namespace: monitoring}]}", want: map[string][]string{"ClusterRoleBinding/nexo-operator-metrics-reader-nexo-system": {"name: prometheus-k8s"}}},
		"metrics.certSecret": {set: "metrics: {certSecret: metrics-tls, serviceMonitor: {enabled: true, tokenSecret: {name: scraper}}}", want: map[string][]string{
			op: {"--metrics-cert-dir=/var/run/nexo/metrics-certs", "secretName: metrics-tls"}, mgr: {"--metrics-cert-dir=/var/run/nexo/metrics-certs", "secretName: metrics-tls"},
			"ServiceMonitor/nexo-operator": {"serverName: nexo-operator-metrics.nexo-system.svc", "name: metrics-tls"},
			"ServiceMonitor/nexo-manager":  {"serverName: nexo-manager-metrics.nexo-system.svc"}}},
		"metrics.serviceMonitor.enabled":             {set: "metrics: {serviceMonitor: {enabled: true, tokenSecret: {name: scraper}}}", want: map[string][]string{"ServiceMonitor/nexo-operator": {"interval: 30s", "insecureSkipVerify: true"}, "ServiceMonitor/nexo-manager": {"interval: 30s"}}},
		"metrics.serviceMonitor.interval":            {set: "metrics: {serviceMonitor: {enabled: true, interval: 45s, tokenSecret: {name: scraper}}}", want: map[string][]string{"ServiceMonitor/nexo-operator": {"interval: 45s"}}},
		"metrics.serviceMonitor.labels":              {set: "metrics: {serviceMonitor: {enabled: true, labels: {release: kps}, tokenSecret: {name: scraper}}}", want: map[string][]string{"ServiceMonitor/nexo-manager": {"release: kps"}}},
		"metrics.serviceMonitor.tokenSecret.name":    {set: "metrics: {serviceMonitor: {enabled: true, tokenSecret: {name: scraper}}}", want: map[string][]string{"ServiceMonitor/nexo-operator": {"name: scraper"}, "ServiceMonitor/nexo-manager": {"name: scraper"}}},
		"metrics.serviceMonitor.tokenSecret.key":     {set: "metrics: {serviceMonitor: {enabled: true, tokenSecret: {name: scraper, key: bearer}}}", want: map[string][]string{"ServiceMonitor/nexo-operator": {"key: bearer"}}},
		"metrics.podMonitor.enabled":                 {set: "metrics: {podMonitor: {enabled: true, tokenSecret: {name: scraper}}}", want: map[string][]string{"PodMonitor/nexo-operator": {"interval: 30s", "jobLabel: app.kubernetes.io/name", "insecureSkipVerify: true"}, "PodMonitor/nexo-manager": {"interval: 30s"}}},
		"metrics.podMonitor.interval":                {set: "metrics: {podMonitor: {enabled: true, interval: 45s, tokenSecret: {name: scraper}}}", want: map[string][]string{"PodMonitor/nexo-operator": {"interval: 45s"}}},
		"metrics.podMonitor.labels":                  {set: "metrics: {podMonitor: {enabled: true, labels: {release: kps}, tokenSecret: {name: scraper}}}", want: map[string][]string{"PodMonitor/nexo-manager": {"release: kps"}}},
		"metrics.podMonitor.tokenSecret.name":        {set: "metrics: {podMonitor: {enabled: true, tokenSecret: {name: scraper}}}", want: map[string][]string{"PodMonitor/nexo-operator": {"name: scraper"}, "PodMonitor/nexo-manager": {"name: scraper"}}},
		"metrics.podMonitor.tokenSecret.key":         {set: "metrics: {podMonitor: {enabled: true, tokenSecret: {name: scraper, key: bearer}}}", want: map[string][]string{"PodMonitor/nexo-operator": {"key: bearer"}}},
		"metrics.prometheusRule.enabled":             {set: "metrics: {prometheusRule: {enabled: true}}", want: map[string][]string{"PrometheusRule/nexo-edge": {"alert: NexoOperatorDown", "alert: NexoManagerHeartbeatStale", "$labels.controller"}}},
		"metrics.prometheusRule.labels":              {set: "metrics: {prometheusRule: {enabled: true, labels: {role: alert-rules}}}", want: map[string][]string{"PrometheusRule/nexo-edge": {"role: alert-rules"}}},
		"metrics.dashboard.enabled":                  {set: "metrics: {dashboard: {enabled: true}}", want: map[string][]string{"ConfigMap/nexo-edge-dashboard": {`grafana_dashboard: "1"`, "nexo-edge.json: |-", `"uid": "nexo-edge"`, "namespace: nexo-system"}}},
		"metrics.dashboard.namespace":                {set: "metrics: {dashboard: {enabled: true, namespace: grafana}}", want: map[string][]string{"ConfigMap/nexo-edge-dashboard": {"namespace: grafana"}}},
		"metrics.dashboard.labels.grafana_dashboard": {set: "metrics: {dashboard: {enabled: true, labels: {grafana_dashboard: \"nexo\"}}}", want: map[string][]string{"ConfigMap/nexo-edge-dashboard": {`grafana_dashboard: nexo`}}},
		"metrics.dashboard.annotations":              {set: "metrics: {dashboard: {enabled: true, annotations: {grafana_folder: Nexo Edge}}}", want: map[string][]string{"ConfigMap/nexo-edge-dashboard": {"grafana_folder: Nexo Edge"}}},
		"networkPolicy.enabled":                      {set: "networkPolicy: {enabled: true}", want: map[string][]string{"NetworkPolicy/nexo-edge": {"port: 6443", "port: 5353"}}},
		"networkPolicy.egressPorts":                  {set: "networkPolicy: {enabled: true, egressPorts: [8443]}", want: map[string][]string{"NetworkPolicy/nexo-edge": {"port: 8443"}}},
		"networkPolicy.dnsPorts":                     {set: "networkPolicy: {enabled: true, dnsPorts: [1053]}", want: map[string][]string{"NetworkPolicy/nexo-edge": {"port: 1053"}}},
		"networkPolicy.metricsFrom":                  {set: "networkPolicy: {enabled: true, metricsFrom: [{namespaceSelector: {matchLabels: {team: monitoring}}}]}", want: map[string][]string{"NetworkPolicy/nexo-edge": {"team: monitoring", "port: metrics"}}},
	}
	// The values the operator and the Manager share, rendered into their own Deployment.
	for component, dep := range map[string]string{"operator": op, "manager": mgr} {
		set := func(v string) string { return component + ": {" + v + "}" }
		repo := "ghcr.io/nexo-io/nexo-" + component
		for path, vc := range map[string]valueCase{
			"image.repository":           {set: set("image: {repository: registry.test/" + component + "}"), want: map[string][]string{dep: {"image: registry.test/" + component + ":"}}},
			"image.tag":                  {set: set("image: {tag: \"9.9.9\"}"), want: map[string][]string{dep: {repo + ":9.9.9"}}},
			"image.digest":               {set: set("image: {digest: sha256:" + strings.Repeat("b", 64) + "}"), want: map[string][]string{dep: {repo + "@sha256:" + strings.Repeat("b", 64)}}},
			"image.pullPolicy":           {set: set("image: {pullPolicy: Always}"), want: map[string][]string{dep: {"imagePullPolicy: Always"}}},
			"resources.requests.cpu":     {set: set("resources: {requests: {cpu: 333m}}"), want: map[string][]string{dep: {"cpu: 333m"}}},
			"resources.requests.memory":  {set: set("resources: {requests: {memory: 222Mi}}"), want: map[string][]string{dep: {"memory: 222Mi"}}},
			"resources.limits.memory":    {set: set("resources: {limits: {memory: 777Mi}}"), want: map[string][]string{dep: {"memory: 777Mi"}}},
			"nodeSelector":               {set: set("nodeSelector: {pool: edge}"), want: map[string][]string{dep: {"pool: edge"}}},
			"tolerations":                {set: set("tolerations: [{key: dedicated, operator: Exists}]"), want: map[string][]string{dep: {"key: dedicated"}}},
			"affinity":                   {set: set("affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: {nodeSelectorTerms: [{matchExpressions: [{key: zone, operator: In, values: [z9]}]}]}}}"), want: map[string][]string{dep: {"- z9"}}},
			"topologySpreadConstraints":  {set: set("topologySpreadConstraints: [{maxSkew: 7, topologyKey: zone, whenUnsatisfiable: ScheduleAnyway, labelSelector: {}}]"), want: map[string][]string{dep: {"maxSkew: 7"}}},
			"priorityClassName":          {set: set("priorityClassName: edge-critical"), want: map[string][]string{dep: {"priorityClassName: edge-critical"}}},
			"podLabels":                  {set: set("podLabels: {team: edge}"), want: map[string][]string{dep: {"team: edge"}}},
			"podAnnotations":             {set: set("podAnnotations: {owner: edge}"), want: map[string][]string{dep: {"owner: edge"}}},
			"extraArgs":                  {set: set("extraArgs: [--extra-flag=1]"), want: map[string][]string{dep: {"--extra-flag=1"}}},
			"extraEnv":                   {set: set("extraEnv: [{name: EXTRA_ENV, value: \"1\"}]"), want: map[string][]string{dep: {"name: EXTRA_ENV"}}},
			"serviceAccount.create":      {set: set("serviceAccount: {create: false}"), gone: []string{"ServiceAccount/nexo-" + component}},
			"serviceAccount.annotations": {set: set("serviceAccount: {annotations: {iam.test/role: edge}}"), want: map[string][]string{"ServiceAccount/nexo-" + component: {"iam.test/role: edge"}}},
			// Merged over the restricted defaults, which stay.
			"podSecurityContext": {set: set("podSecurityContext: {fsGroup: 65532}"), want: map[string][]string{dep: {"fsGroup: 65532"}}},
			"securityContext":    {set: set("securityContext: {runAsUser: 65532}"), want: map[string][]string{dep: {"runAsUser: 65532"}}},
			"extraVolumes":       {set: set("extraVolumes: [{name: corp-ca, configMap: {name: corp-ca}}]"), want: map[string][]string{dep: {"name: corp-ca"}}},
			"extraVolumeMounts":  {set: set("extraVolumeMounts: [{name: corp-ca, mountPath: /etc/corp-ca}], extraVolumes: [{name: corp-ca, configMap: {name: corp-ca}}]"), want: map[string][]string{dep: {"mountPath: /etc/corp-ca"}}},
		} {
			c[component+"."+path] = vc
		}
	}
	return c
}

// valuePaths are the dotted paths of values.yaml's leaves.
func valuePaths(t *testing.T) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(raw, &values); err != nil {
		t.Fatal(err)
	}
	var paths []string
	leaves("", values, &paths)
	return paths
}

// leaves lists the dotted paths of values.yaml's leaves (an empty map or a list is a leaf).
func leaves(prefix string, v any, out *[]string) {
	m, ok := v.(map[string]any)
	if !ok || len(m) == 0 {
		*out = append(*out, prefix)
		return
	}
	for k, x := range m {
		p := k
		if prefix != "" {
			p = prefix + "." + k
		}
		leaves(p, x, out)
	}
}

// TestEveryValueIsRendered: every value of values.yaml, set to something other than its
// default, changes the rendered objects where it says it does.
func TestEveryValueIsRendered(t *testing.T) {
	paths := valuePaths(t)
	sort.Strings(paths)
	cases := valueCases()
	for _, p := range paths {
		if _, ok := cases[p]; !ok {
			t.Errorf("values.yaml has %s, and no case in valueCases asserts what it renders", p)
		}
	}
	for p := range cases {
		if !slices.Contains(paths, p) {
			t.Errorf("valueCases has %s, which values.yaml does not", p)
		}
	}
	base, err := render(t, "")
	if err != nil {
		t.Fatal(err)
	}
	validate := strictServer(t)
	validate(t, base)
	for _, p := range paths {
		c, ok := cases[p]
		if !ok {
			continue
		}
		t.Run(p, func(t *testing.T) {
			docs, err := render(t, c.set+"\n")
			if err != nil {
				t.Fatalf("%s: %v", c.set, err)
			}
			for key, texts := range c.want {
				for _, text := range texts {
					if strings.Contains(string(base[key]), text) {
						t.Errorf("%s already contains %q by default: the case proves nothing", key, text)
					}
					if !strings.Contains(string(docs[key]), text) {
						t.Errorf("with %s, %s does not contain %q:\n%s", c.set, key, text, docs[key])
					}
				}
			}
			for _, key := range c.gone {
				if _, ok := base[key]; !ok {
					t.Errorf("%s is not rendered by default either: the case proves nothing", key)
				}
				if _, ok := docs[key]; ok {
					t.Errorf("with %s, %s is still rendered", c.set, key)
				}
			}
			if len(c.want) == 0 && len(c.gone) == 0 {
				t.Error(fmt.Sprintf("the case for %s asserts nothing", p))
			}
			validate(t, docs)
		})
	}
}

// strictServer starts an API server with prometheus-operator's CRDs and returns a check that
// every rendered object is accepted by it: a dry-run create under strict field validation, which is
// what kubeconform checks, here by the API's own schemas (built-in kinds, CRDs, CEL rules).
func strictServer(t *testing.T) func(*testing.T, map[string][]byte) {
	t.Helper()
	accepts := strictAPIServer(t)
	return func(t *testing.T, docs map[string][]byte) {
		t.Helper()
		for _, key := range slices.Sorted(maps.Keys(docs)) {
			if err := accepts(docs[key]); err != nil {
				t.Errorf("%s: the API server refuses it under strict field validation: %v", key, err)
			}
		}
	}
}

// strictAPIServer starts the API server of strictServer and returns its check of one object.
func strictAPIServer(t *testing.T) func(raw []byte) error {
	t.Helper()
	ctx := context.Background()
	c, err := testcluster.Start(ctx, testcluster.Options{Mode: testcluster.Envtest})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Stop() })
	k8s, err := client.New(c.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := monitoring.Install(ctx, k8s); err != nil {
		t.Fatal(err)
	}
	namespaces := map[string]bool{}
	return func(raw []byte) error {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(raw, &u.Object); err != nil {
			return err
		}
		if ns := u.GetNamespace(); ns != "" && !namespaces[ns] {
			obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}}
			if err := k8s.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
				return err
			}
			namespaces[ns] = true
		}
		return k8s.Create(ctx, u, client.DryRunAll, client.FieldValidation("Strict"))
	}
}

// TestSecurityContextsMergeOverTheRestrictedDefaults: a component's podSecurityContext and
// securityContext add to (or change one field of) the restricted defaults; the others stay.
func TestSecurityContextsMergeOverTheRestrictedDefaults(t *testing.T) {
	docs, err := render(t, "operator: {podSecurityContext: {fsGroup: 65532}, securityContext: {runAsUser: 65532}}\n")
	if err != nil {
		t.Fatal(err)
	}
	var d appsv1.Deployment
	if err := yaml.Unmarshal(docs["Deployment/nexo-operator"], &d); err != nil {
		t.Fatal(err)
	}
	pod, c := d.Spec.Template.Spec.SecurityContext, d.Spec.Template.Spec.Containers[0].SecurityContext
	if pod == nil || pod.FSGroup == nil || *pod.FSGroup != 65532 || pod.RunAsNonRoot == nil || !*pod.RunAsNonRoot || pod.SeccompProfile == nil {
		t.Errorf("pod securityContext %+v: want fsGroup 65532 over runAsNonRoot and seccomp RuntimeDefault", pod)
	}
	if c == nil || c.RunAsUser == nil || *c.RunAsUser != 65532 || c.ReadOnlyRootFilesystem == nil || !*c.ReadOnlyRootFilesystem ||
		c.AllowPrivilegeEscalation == nil || *c.AllowPrivilegeEscalation || c.Capabilities == nil || len(c.Capabilities.Drop) != 1 {
		t.Errorf("container securityContext %+v: want runAsUser 65532 over the restricted defaults", c)
	}
}

// TestChartREADMEDescribesEveryValue: the chart README (generated by make chart from
// values.yaml) has a row for every value of values.yaml, each saying what it does: a value
// without a comment in values.yaml (or above its parent) fails here.
func TestChartREADMEDescribesEveryValue(t *testing.T) {
	paths := valuePaths(t)
	readme, err := os.ReadFile(filepath.Join(chartDir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]string{}
	for _, line := range strings.Split(string(readme), "\n") {
		cells := strings.Split(line, " | ")
		if len(cells) == 3 && strings.HasPrefix(cells[0], "| `") {
			rows[strings.Trim(cells[0], "| `")] = strings.TrimSuffix(strings.TrimSpace(cells[2]), "|")
		}
	}
	for _, p := range paths {
		meaning, ok := rows[p]
		if !ok {
			t.Errorf("the chart README has no row for %s (run make chart)", p)
		} else if strings.TrimSpace(meaning) == "" {
			t.Errorf("the chart README says nothing of %s: give it (or its parent) a comment in values.yaml", p)
		}
	}
	if !strings.Contains(string(readme), "--set manager.controlPlaneURL=") || !strings.Contains(string(readme), "create secret generic nexo-connect-token") {
		t.Error("the chart README's quick start does not set the Control Plane URL and the token Secret: it would not work as written")
	}
}
