package preflight

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/version"

	"github.com/nexo-io/nexo-edge/catalog"
	"github.com/nexo-io/nexo-edge/config/admission"
	"github.com/nexo-io/nexo-edge/contract/connecttoken"
	"github.com/nexo-io/nexo-edge/contract/fingerprint"
	"github.com/nexo-io/nexo-edge/contract/wire"
)

// MinKubernetesVersion is the oldest Kubernetes this build supports (the catalog's).
const MinKubernetesVersion = catalog.MinKubernetesVersion

// ClusterCategories are the checks `nexoctl preflight` runs against a cluster; with pre, the
// pre-install checks (permissions instead of installed state).
func ClusterCategories(pre bool) []Category {
	cats := []Category{{Name: "kubernetes-api", Checks: []Check{
		{ID: "api-reachable", Description: "can reach the Kubernetes API", Fatal: true, RetryDeadline: 5 * time.Second,
			Hint: "check --kubeconfig and --context, and that the API server is reachable", Run: checkReachable},
		{ID: "api-version", Description: "Kubernetes version is supported (>= " + MinKubernetesVersion + ")", Fatal: true,
			Hint: "upgrade the cluster to Kubernetes " + MinKubernetesVersion + " or later", Run: checkVersion},
	}}}
	if pre {
		return append(cats, Category{Name: "pre-install-permissions", Checks: []Check{
			{ID: "install-permissions", Description: "can create the resources the chart installs", Fatal: true,
				Hint: "install as a cluster administrator, or ask one to grant the listed verbs", Run: checkPermissions},
		}})
	}
	return append(cats,
		Category{Name: "nexo-crds", Checks: []Check{
			{ID: "crds-installed", Description: fmt.Sprintf("all %d nexo.io CRDs are installed", len(catalog.Kinds)), Fatal: true,
				Hint: "install the chart (nexoctl install) or apply config/crd", Run: checkCRDsPresent},
			{ID: "crds-version", Description: "CRDs serve and store " + catalog.Version, Hint: "reinstall the CRDs of bundle " + catalog.BuildVersion, Run: checkCRDVersions},
			{ID: "crds-keep-policy", Description: "CRDs carry helm.sh/resource-policy: keep", Hint: "reinstall the CRDs with the chart so uninstalling never deletes them", Run: checkKeep},
			{ID: "crds-fingerprint", Description: "installed schema fingerprint matches nexoctl " + catalog.BuildVersion, Hint: "the listed CRDs were changed or come from another bundle; reinstall bundle " + catalog.BuildVersion + " CRDs", Run: checkFingerprint},
		}},
		supportMatrixCategory(),
		Category{Name: "nexo-edge-components", Checks: []Check{
			{ID: "operator-available", Description: "nexo-operator is available", RetryDeadline: 10 * time.Second, Hint: "kubectl -n {namespace} describe deployment nexo-operator", Run: checkAvailable(wire.OperatorName)},
			{ID: "manager-available", Description: "nexo-manager is available", RetryDeadline: 10 * time.Second, Hint: "kubectl -n {namespace} describe deployment nexo-manager", Run: ifManagerInstalled(checkAvailable(wire.ManagerName))},
			{ID: "manager-configured", Description: "nexo-manager is configured", Hint: "nexoctl install --token-file ./connect-token --control-plane-url URL -n {namespace} (the URL from the Control Plane's install command)", Run: ifManagerInstalled(checkManagerConfigured)},
			{ID: "connect-token", Description: "connect-token Secret is present and well-formed", Hint: "save the token the Control Plane gave you to ./connect-token, then run nexoctl install --token-file ./connect-token -n {namespace}", Run: ifManagerInstalled(checkToken)},
			{ID: "manager-heartbeat", Description: "nexo-manager reaches the Control Plane", Hint: "kubectl -n {namespace} logs deployment/nexo-manager; check the Control Plane URL and outbound network policy", Run: ifManagerInstalled(checkManagerHeartbeat)},
			{ID: "manager-deploy-limit", Description: "nexo-manager may deploy somewhere", Hint: "nexoctl install --token-file ./connect-token -n {namespace} --set manager.deployNamespaces={NAMESPACE,...} --set manager.allowedImageRepositories={REPOSITORY,...}", Run: ifManagerInstalled(checkDeployLimit)},
			{ID: "images-pinned", Description: "images are pinned", Hint: "pin images by tag or, better, by digest (repository@sha256:...)", Run: checkImagesPinned},
		}},
	)
}

// OfflineCategories are the checks `nexoctl preflight -f DIR` runs on manifests.
func OfflineCategories() []Category {
	return []Category{supportMatrixCategory(), {Name: "images", Checks: []Check{
		{ID: "images-pinned", Description: "images are pinned", Hint: "pin images by tag or, better, by digest (repository@sha256:...)", Run: checkImagesPinned},
	}}}
}

func supportMatrixCategory() Category {
	return Category{Name: "support-matrix", Checks: []Check{
		{ID: "operator-version", Description: "operator version is in nexoctl's support matrix", Hint: "use the nexoctl that matches the operator's bundle version", Run: checkOperatorVersion},
		{ID: "schema-only-objects", Description: "no objects of schema-only kinds", Hint: "objects of schema-only kinds are stored but never reconciled; remove them or wait for a bundle that reconciles the kind", Run: checkSchemaOnlyObjects},
		{ID: "pipeline-references", Description: "NexoPipelines reference only reconciled, installed kinds", Hint: "replace the listed references with kinds the operator reconciles (nexoctl preflight lists them)", Run: checkPipelineRefs},
	}}
}

func checkReachable(ctx context.Context, e *Env) Outcome {
	v, err := e.Discovery.ServerVersion()
	if err != nil {
		return fail(err.Error())
	}
	return ok("Kubernetes " + v.GitVersion)
}

func checkVersion(ctx context.Context, e *Env) Outcome {
	v, err := e.Discovery.ServerVersion()
	if err != nil {
		return fail(err.Error())
	}
	got, err := version.ParseGeneric(v.GitVersion)
	if err != nil {
		return fail(fmt.Sprintf("cannot parse the server version %q", v.GitVersion))
	}
	if got.LessThan(version.MustParseGeneric(MinKubernetesVersion)) {
		return fail(fmt.Sprintf("Kubernetes %s is older than %s: %s", v.GitVersion, MinKubernetesVersion, catalog.MinKubernetesReason))
	}
	return ok("Kubernetes " + v.GitVersion)
}

// installResources are what the chart creates (group, resource, namespaced).
var installResources = []struct {
	group, resource string
	namespaced      bool
}{
	{"apiextensions.k8s.io", "customresourcedefinitions", false},
	{"rbac.authorization.k8s.io", "clusterroles", false},
	{"rbac.authorization.k8s.io", "clusterrolebindings", false},
	{"rbac.authorization.k8s.io", "roles", true},
	{"rbac.authorization.k8s.io", "rolebindings", true},
	{"admissionregistration.k8s.io", "validatingadmissionpolicies", false},
	{"admissionregistration.k8s.io", "validatingadmissionpolicybindings", false},
	{"", "serviceaccounts", true},
	{"", "services", true},
	{"", "secrets", true},
	{"apps", "deployments", true},
}

func checkPermissions(ctx context.Context, e *Env) Outcome {
	var missing []string
	for _, r := range installResources {
		ns := ""
		if r.namespaced {
			ns = e.Namespace
		}
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Group: r.group, Resource: r.resource, Verb: "create", Namespace: ns},
		}}
		if err := e.Client.Create(ctx, review); err != nil {
			return fail(err.Error())
		}
		if !review.Status.Allowed {
			where := "cluster-wide"
			if ns != "" {
				where = "in namespace " + ns
			}
			missing = append(missing, fmt.Sprintf("create %s %s", qualified(r.group, r.resource), where))
		}
	}
	if len(missing) > 0 {
		return fail(fmt.Sprintf("%d permissions missing", len(missing)), missing...)
	}
	return ok(fmt.Sprintf("can create all %d resource types", len(installResources)))
}

func qualified(group, resource string) string {
	if group == "" {
		return resource
	}
	return resource + "." + group
}

func checkCRDsPresent(ctx context.Context, e *Env) Outcome {
	crds, err := e.installedCRDs(ctx)
	if err != nil {
		return fail(err.Error())
	}
	have := map[string]bool{}
	for _, c := range crds {
		have[c.Name] = true
	}
	var missing []string
	for _, k := range catalog.Kinds {
		if !have[k.CRDName()] {
			missing = append(missing, k.CRDName())
		}
	}
	if len(missing) > 0 {
		return fail(fmt.Sprintf("%d of %d CRDs missing", len(missing), len(catalog.Kinds)), missing...)
	}
	return ok(fmt.Sprintf("%d CRDs installed", len(catalog.Kinds)))
}

func checkCRDVersions(ctx context.Context, e *Env) Outcome {
	crds, err := e.installedCRDs(ctx)
	if err != nil {
		return fail(err.Error())
	}
	var bad []string
	for _, c := range crds {
		served, stored := false, false
		for _, v := range c.Spec.Versions {
			if v.Name == catalog.Version {
				served, stored = v.Served, v.Storage
			}
		}
		if !served || !stored {
			bad = append(bad, fmt.Sprintf("%s: served=%v storage=%v for %s", c.Name, served, stored, catalog.Version))
		}
	}
	if len(bad) > 0 {
		return fail(fmt.Sprintf("%d CRDs do not serve and store %s", len(bad), catalog.Version), bad...)
	}
	return ok("")
}

func checkKeep(ctx context.Context, e *Env) Outcome {
	crds, err := e.installedCRDs(ctx)
	if err != nil {
		return fail(err.Error())
	}
	var bad []string
	for _, c := range crds {
		if c.Annotations[catalog.ResourcePolicyKey] != catalog.ResourcePolicyKeep {
			bad = append(bad, c.Name)
		}
	}
	if len(bad) > 0 {
		return warn(fmt.Sprintf("%d CRDs would be deleted by helm uninstall", len(bad)), bad...)
	}
	return ok("")
}

func checkFingerprint(ctx context.Context, e *Env) Outcome {
	crds, err := e.installedCRDs(ctx)
	if err != nil {
		return fail(err.Error())
	}
	want, wantPer, err := fingerprint.Expected()
	if err != nil {
		return fail(err.Error())
	}
	got, gotPer := fingerprint.Of(crds)
	if got == want {
		return ok("sha256:" + got[:16])
	}
	var differ []string
	for _, k := range catalog.Kinds {
		switch {
		case gotPer[k.Kind] == "":
			differ = append(differ, k.Kind+": not installed")
		case gotPer[k.Kind] != wantPer[k.Kind]:
			differ = append(differ, k.Kind+": schema differs")
		}
	}
	return fail(fmt.Sprintf("installed sha256:%s, expected sha256:%s", got[:16], want[:16]), differ...)
}

// operatorSupport returns the support matrix of the running operator (offline: this build's).
func operatorSupport(ctx context.Context, e *Env) (string, map[string]catalog.Support, error) {
	if e.Offline {
		return catalog.BuildVersion, SupportMatrix[catalog.BuildVersion], nil
	}
	d, err := e.deployment(ctx, wire.OperatorName)
	if err != nil || d == nil {
		return "", SupportMatrix[catalog.BuildVersion], err
	}
	v := OperatorVersion(d)
	if m, ok := SupportMatrix[v]; ok {
		return v, m, nil
	}
	return v, nil, nil
}

func checkOperatorVersion(ctx context.Context, e *Env) Outcome {
	v, m, err := operatorSupport(ctx, e)
	switch {
	case err != nil:
		return fail(err.Error())
	case v == "":
		return warn("no nexo-operator Deployment in namespace " + e.Namespace + "; judging with nexoctl's own matrix (" + catalog.BuildVersion + ")")
	case m == nil:
		return warn(fmt.Sprintf("operator version %s is not in nexoctl %s's support matrix", v, catalog.BuildVersion))
	}
	var reconciled, schemaOnly []string
	for _, k := range catalog.Kinds {
		if m[k.Kind] == catalog.Reconciled {
			reconciled = append(reconciled, k.Kind)
		} else {
			schemaOnly = append(schemaOnly, k.Kind)
		}
	}
	return ok(fmt.Sprintf("operator %s reconciles %d kinds; %d are schema-only", v, len(reconciled), len(schemaOnly)),
		"reconciled: "+strings.Join(reconciled, ", "), "schema-only: "+strings.Join(schemaOnly, ", "))
}

func supportOf(m map[string]catalog.Support, kind string) catalog.Support {
	if m == nil {
		m = SupportMatrix[catalog.BuildVersion]
	}
	return m[kind]
}

func checkSchemaOnlyObjects(ctx context.Context, e *Env) Outcome {
	_, m, err := operatorSupport(ctx, e)
	if err != nil {
		return fail(err.Error())
	}
	var kinds []string
	for _, k := range catalog.Kinds {
		if supportOf(m, k.Kind) != catalog.Reconciled {
			kinds = append(kinds, k.Kind)
		}
	}
	objs, err := e.nexoObjects(ctx, kinds...)
	if err != nil {
		return fail(err.Error())
	}
	if len(objs) == 0 {
		return ok("")
	}
	var found []string
	for _, o := range objs {
		found = append(found, fmt.Sprintf("%s %s: %s", o.GetKind(), nsName(o), catalog.UnsupportedMessage(o.GetKind())))
	}
	return warn(fmt.Sprintf("%d objects of schema-only kinds are never reconciled", len(objs)), found...)
}

func nsName(o *unstructured.Unstructured) string {
	if o.GetNamespace() == "" {
		return o.GetName()
	}
	return o.GetNamespace() + "/" + o.GetName()
}

func checkPipelineRefs(ctx context.Context, e *Env) Outcome {
	_, m, err := operatorSupport(ctx, e)
	if err != nil {
		return fail(err.Error())
	}
	installed := map[string]bool{}
	if e.Offline {
		for _, k := range catalog.Kinds {
			installed[k.Kind] = true
		}
	} else {
		crds, err := e.installedCRDs(ctx)
		if err != nil {
			return fail(err.Error())
		}
		for _, c := range crds {
			installed[c.Spec.Names.Kind] = true
		}
	}
	pipelines, err := e.nexoObjects(ctx, "NexoPipeline")
	if err != nil {
		return fail(err.Error())
	}
	var bad []string
	for _, u := range pipelines {
		p := &nexov1alpha1.NexoPipeline{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, p); err != nil {
			bad = append(bad, fmt.Sprintf("NexoPipeline %s cannot be read: %v", nsName(u), err))
			continue
		}
		for _, ref := range p.Refs() {
			_, known := catalog.Lookup(ref.Kind)
			switch {
			case !known:
				bad = append(bad, fmt.Sprintf("NexoPipeline %s %s: %s is not a Nexo kind", nsName(u), ref.Position(), ref.Kind))
			case !installed[ref.Kind]:
				bad = append(bad, fmt.Sprintf("NexoPipeline %s %s: %s has no CRD installed", nsName(u), ref.Position(), ref.Kind))
			case supportOf(m, ref.Kind) != catalog.Reconciled:
				bad = append(bad, fmt.Sprintf("NexoPipeline %s %s: %s", nsName(u), ref.Position(), catalog.UnsupportedMessage(ref.Kind)))
			}
		}
	}
	if len(bad) > 0 {
		return fail(fmt.Sprintf("%d references can never become Ready", len(bad)), bad...)
	}
	return ok(fmt.Sprintf("%d pipelines checked", len(pipelines)))
}

// ifManagerInstalled runs a Manager check only when the Manager is part of the install: with
// manager.enabled=false there is neither a nexo-manager Deployment nor a connect-token Secret,
// and that is not an error. Either one present means the Manager is expected, and checked.
func ifManagerInstalled(check func(context.Context, *Env) Outcome) func(context.Context, *Env) Outcome {
	return func(ctx context.Context, e *Env) Outcome {
		d, err := e.deployment(ctx, wire.ManagerName)
		if err == nil && d == nil {
			err := e.Client.Get(ctx, types.NamespacedName{Namespace: e.Namespace, Name: e.TokenSecret}, &corev1.Secret{})
			if apierrors.IsNotFound(err) {
				return ok("the Manager is not installed (manager.enabled=false): nothing to check")
			}
		}
		return check(ctx, e)
	}
}

func checkAvailable(name string) func(context.Context, *Env) Outcome {
	return func(ctx context.Context, e *Env) Outcome {
		d, err := e.deployment(ctx, name)
		if err != nil {
			return fail(err.Error())
		}
		if d == nil {
			out := fail(fmt.Sprintf("no %s Deployment in namespace %s", name, e.Namespace))
			out.Final = true
			return out
		}
		want := int32(1)
		if d.Spec.Replicas != nil {
			want = *d.Spec.Replicas
		}
		if want == 0 {
			out := fail(fmt.Sprintf("%s is scaled to 0 replicas: nothing runs (kubectl -n %s scale deployment %s --replicas=1)", name, e.Namespace, name))
			out.Final = true
			return out
		}
		if d.Status.AvailableReplicas < want {
			return fail(fmt.Sprintf("%d/%d replicas available", d.Status.AvailableReplicas, want))
		}
		return ok(fmt.Sprintf("%s, %d/%d replicas available", OperatorVersion(d), d.Status.AvailableReplicas, want))
	}
}

func checkToken(ctx context.Context, e *Env) Outcome {
	s := &corev1.Secret{}
	if err := e.Client.Get(ctx, types.NamespacedName{Namespace: e.Namespace, Name: e.TokenSecret}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return fail(fmt.Sprintf("Secret %s not found in namespace %s", e.TokenSecret, e.Namespace))
		}
		return fail(err.Error())
	}
	env, err := connecttoken.Parse(string(s.Data[wire.ConnectTokenKey]))
	if err != nil {
		return fail(fmt.Sprintf("Secret %s key \"token\": %v", e.TokenSecret, err)) // errors never carry the token
	}
	return ok("environment " + env)
}

// managerStatus reads the status ConfigMap the Manager writes (nexo-manager-status); without one,
// the outcome is a warning saying notYet.
func managerStatus(ctx context.Context, e *Env, notYet string) (*corev1.ConfigMap, *Outcome) {
	cm := &corev1.ConfigMap{}
	if err := e.Client.Get(ctx, types.NamespacedName{Namespace: e.Namespace, Name: wire.ManagerStatusConfigMap}, cm); err != nil {
		out := fail(err.Error())
		if apierrors.IsNotFound(err) {
			out = warn(notYet)
		}
		return nil, &out
	}
	return cm, nil
}

// checkManagerConfigured reads whether the Manager has what it needs to connect (its status
// ConfigMap's configured and notConfigured), and if not, what is missing and where to create it.
func checkManagerConfigured(ctx context.Context, e *Env) Outcome {
	cm, missing := managerStatus(ctx, e, "the Manager has not reported its configuration yet")
	if missing != nil {
		return *missing
	}
	switch cm.Data[wire.StatusConfigured] {
	case "true":
		return ok("it has a Control Plane URL, a connect token and the trusted-keys Secret")
	case "false":
		return fail("not configured: " + cm.Data[wire.StatusNotConfigured])
	}
	return warn("this Manager does not report its configuration (before 0.3.0); see manager-heartbeat")
}

// checkManagerHeartbeat reads the status object the Manager writes (ConfigMap nexo-manager-status).
func checkManagerHeartbeat(ctx context.Context, e *Env) Outcome {
	cm, missing := managerStatus(ctx, e, "the Manager has not reported a heartbeat yet")
	if missing != nil {
		return *missing
	}
	if cm.Data[wire.StatusConfigured] == "false" {
		return warn("no heartbeat: the Manager is not configured yet (manager-configured says what is missing)")
	}
	last, err := time.Parse(time.RFC3339, cm.Data[wire.StatusLastHeartbeatTime])
	if err != nil {
		if cm.Data[wire.StatusControlPlaneReachable] != "true" {
			return warn("the Control Plane is unreachable: " + cm.Data[wire.StatusLastHeartbeatResult])
		}
		return warn("no successful heartbeat yet")
	}
	return heartbeatAge(time.Since(last), cm.Data[wire.StatusHeartbeatInterval], cm.Data[wire.StatusControlPlaneReachable] == "true", cm.Data[wire.StatusLastHeartbeatResult])
}

// defaultHeartbeatInterval is the Control Plane's default, for a Manager that does not report
// the interval it was asked for (before 0.3.0).
const defaultHeartbeatInterval = 30 * time.Second

// heartbeatAge judges the last successful heartbeat's age as the Control Plane does: stale past
// 3 intervals (a warning), lost past 10 (a failure: the Control Plane refuses commands to a lost
// environment). reachable and result are the Manager's last attempt.
func heartbeatAge(age time.Duration, intervalSeconds string, reachable bool, result string) Outcome {
	interval := defaultHeartbeatInterval
	if n, err := strconv.Atoi(intervalSeconds); err == nil && n > 0 {
		interval = time.Duration(n) * time.Second
	}
	age = age.Round(time.Second)
	why := ""
	if !reachable {
		why = "; its last attempt: " + result
	}
	switch {
	case age > 10*interval:
		return fail(fmt.Sprintf("last heartbeat %s ago, more than 10 heartbeat intervals (%s): the Control Plane counts this environment as lost and refuses its commands%s", age, interval, why))
	case age > 3*interval:
		return warn(fmt.Sprintf("last heartbeat %s ago, more than 3 heartbeat intervals (%s): stale%s", age, interval, why))
	case !reachable:
		return warn(fmt.Sprintf("the Control Plane is unreachable (last heartbeat %s ago): %s", age, result))
	}
	return ok(fmt.Sprintf("last heartbeat %s ago", age))
}

// checkDeployLimit reads the cluster's own limit the Manager reports in its status ConfigMap:
// empty means it refuses every deploy.
func checkDeployLimit(ctx context.Context, e *Env) Outcome {
	cm, missing := managerStatus(ctx, e, "the Manager has not reported its deploy limit yet")
	if missing != nil {
		return *missing
	}
	ns, repos := cm.Data[wire.StatusDeployNamespaces], cm.Data[wire.StatusImageRepositories]
	switch {
	case ns == "":
		return warn("the Manager may deploy nowhere: the cluster's deploy limit is empty, so it refuses every deploy the Control Plane sends")
	case repos == "":
		return warn("the Manager may deploy into " + ns + " but may roll out no image: no image repository is allowed")
	}
	if msg := admissionLimitDiffers(ctx, e, ns, repos); msg != "" {
		return warn(msg)
	}
	return ok("deploys into " + ns + "; images from " + repos)
}

// admissionLimitDiffers compares the limit the Manager reports with the one its admission binding
// holds it to (docs/security.md, "The cluster's own limit"), and says how they differ; "" when
// they agree, or when no binding can be read (admission policy off, or no right to read it).
func admissionLimitDiffers(ctx context.Context, e *Env, namespaces, repositories string) string {
	bindings := &admissionregistrationv1.ValidatingAdmissionPolicyBindingList{}
	if err := e.Client.List(ctx, bindings); err != nil {
		return ""
	}
	same := func(a, b string) bool {
		x, y := wire.SplitNamespaces(a), wire.SplitNamespaces(b)
		slices.Sort(x)
		slices.Sort(y)
		return slices.Equal(x, y)
	}
	for _, b := range bindings.Items {
		if b.Spec.PolicyName != admission.DeployLimitPolicy || b.Annotations[admission.ManagerAnnotation] != admission.ManagerUser(e.Namespace) {
			continue
		}
		held, heldRepos := b.Annotations[admission.DeployNamespacesAnnotation], b.Annotations[admission.ImageRepositoriesAnnotation]
		if same(held, namespaces) && same(heldRepos, repositories) {
			return ""
		}
		return fmt.Sprintf("the Manager reports deploy namespaces %q and image repositories %q, but its admission binding %s holds it to %q and %q: the API server refuses what the binding does not allow. Set the limit once where the install is configured; under OLM, delete the binding and the operator recreates it",
			namespaces, repositories, b.Name, held, heldRepos)
	}
	return ""
}

func checkImagesPinned(ctx context.Context, e *Env) Outcome {
	var images []string
	if e.Offline {
		for _, o := range e.Objects {
			images = append(images, imagesOf(o)...)
		}
	} else {
		for _, name := range []string{wire.OperatorName, wire.ManagerName} {
			if d, err := e.deployment(ctx, name); err == nil && d != nil {
				for _, c := range d.Spec.Template.Spec.Containers {
					images = append(images, c.Image)
				}
			}
		}
		for _, kind := range []string{"NexoDeploymentProfile", "NexoProxy"} {
			objs, _ := e.nexoObjects(ctx, kind)
			for _, o := range objs {
				images = append(images, imagesOf(o)...)
			}
		}
	}
	var unpinned []string
	for _, img := range images {
		if why := unpinnedReason(img); why != "" {
			unpinned = append(unpinned, img+": "+why)
		}
	}
	if len(unpinned) > 0 {
		return warn(fmt.Sprintf("%d of %d images are not pinned", len(unpinned), len(images)), unpinned...)
	}
	return ok(fmt.Sprintf("%d images pinned", len(images)))
}

// unpinnedReason says why an image reference is not pinned, or "".
func unpinnedReason(img string) string {
	if strings.Contains(img, "@sha256:") {
		return ""
	}
	name := img[strings.LastIndex(img, "/")+1:]
	i := strings.LastIndex(name, ":")
	switch {
	case i < 0:
		return "no tag (means latest); pin a tag or a digest"
	case name[i+1:] == "latest":
		return "the latest tag moves; pin a version or a digest"
	}
	return ""
}

// imagesOf lists the images in a workload's pod spec or a NexoDeploymentProfile.
func imagesOf(o *unstructured.Unstructured) []string {
	var out []string
	if o.GetKind() == "NexoDeploymentProfile" {
		for _, f := range []string{"ingress", "egress"} {
			if s, found, _ := unstructured.NestedString(o.Object, "spec", "images", f); found {
				out = append(out, s)
			}
		}
		steps, _, _ := unstructured.NestedSlice(o.Object, "spec", "stepCatalog")
		for _, s := range steps {
			if m, okm := s.(map[string]any); okm {
				if img, _ := m["image"].(string); img != "" {
					out = append(out, img)
				}
			}
		}
		return out
	}
	if o.GetKind() == "NexoProxy" {
		if img, _, _ := unstructured.NestedString(o.Object, "spec", "proxyImage"); img != "" {
			out = append(out, img)
		}
		return out
	}
	for _, path := range [][]string{{"spec", "template", "spec", "containers"}, {"spec", "template", "spec", "initContainers"}, {"spec", "containers"}} {
		cs, _, _ := unstructured.NestedSlice(o.Object, path...)
		for _, c := range cs {
			if m, okm := c.(map[string]any); okm {
				if img, _ := m["image"].(string); img != "" {
					out = append(out, img)
				}
			}
		}
	}
	return out
}
