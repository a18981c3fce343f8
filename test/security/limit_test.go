package security_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/config/admission"
	"github.com/nexo-io/nexo-edge/contract/protocol"
	"github.com/nexo-io/nexo-edge/controlplane"
	"github.com/nexo-io/nexo-edge/controlplane/targeting"
	"github.com/nexo-io/nexo-edge/manager"
	"github.com/nexo-io/nexo-edge/test/framework/testinstall"
)

// allowedRepository is the one image repository the cluster allows in TestDeployOutsideTheLimitRefusedThreeTimes.
const allowedRepository = "registry.example.com/nexo/proxy"

// TestDeployOutsideTheLimitRefusedThreeTimes: the chart installed in nexo-system lets its
// Manager deploy into shop only (manager.deployNamespaces). A deploy into elsewhere is refused
// by the Control Plane (the limit the Manager reported), by the Manager (a command queued with
// the admin token, which skips the Control Plane's targeting), and, with the Manager's own check
// switched off (a Manager built with "*", standing in for a compromised binary), by the API
// server: by RBAC as the chart grants it, and by the admission policy once RBAC is granted
// wider than the limit. A proxy image outside the allowed repositories, and a delete outside the
// limit, are refused by admission too. The Manager runs as the chart's ServiceAccount.
func TestDeployOutsideTheLimitRefusedThreeTimes(t *testing.T) {
	ctx := context.Background()

	// The cluster admin narrows the image limit of the installation's admission binding to one
	// repository (the chart was installed with "*"), and restores it afterwards.
	limitBinding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
	if err := admin.Get(ctx, client.ObjectKey{Name: admission.DeployLimitBindingName(testinstall.Namespace)}, limitBinding); err != nil {
		t.Fatalf("the chart's deploy-limit binding: %v", err)
	}
	if got := limitBinding.Annotations[admission.DeployNamespacesAnnotation]; got != "shop" {
		t.Fatalf("the chart's deploy-limit binding allows %q, want shop (manager.deployNamespaces)", got)
	}
	setImages := func(v string) {
		t.Helper()
		patch := client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"annotations":{"`+admission.ImageRepositoriesAnnotation+`":"`+v+`"}}}`))
		if err := admin.Patch(ctx, limitBinding.DeepCopy(), patch); err != nil {
			t.Fatal(err)
		}
	}
	setImages(allowedRepository)
	t.Cleanup(func() { setImages(limitBinding.Annotations[admission.ImageRepositoriesAnnotation]) })

	// The Control Plane: tenant acme, environment prod (env=production) with namespace targets
	// shop and elsewhere, and a stage that selects both.
	api, cpPub := startControlPlane(t)
	const acme = "/admin/tenants/acme"
	var env controlplane.NewEnvironment
	for _, step := range []struct {
		method, path string
		body, out    any
	}{
		{"POST", "/admin/tenants", map[string]string{"name": "acme"}, nil},
		{"POST", acme + "/projects", map[string]string{"name": "shop"}, nil},
		{"POST", acme + "/environments", map[string]string{"name": "prod"}, &env},
		{"PUT", acme + "/entitlement", targeting.Entitlement{MaxProxies: 10, ExpiresAt: time.Now().Add(time.Hour)}, nil},
	} {
		if err := api.Do(step.method, step.path, step.body, step.out); err != nil {
			t.Fatal(err)
		}
	}
	for _, step := range []struct {
		path string
		body any
	}{
		{acme + "/environments/" + env.ID + "/labels", map[string]any{"labels": map[string]string{"env": "production"}}},
		{acme + "/environments/" + env.ID + "/namespace-targets/shop", map[string]any{"labels": map[string]string{"tier": "web"}}},
		{acme + "/environments/" + env.ID + "/namespace-targets/elsewhere", map[string]any{"labels": map[string]string{"tier": "web"}}},
		{acme + "/projects/shop/stages/prod", controlplane.StageSpec{Environments: map[string]string{"env": "production"}, Namespaces: map[string]string{"tier": "web"}}},
	} {
		if err := api.Do("PUT", step.path, step.body, nil); err != nil {
			t.Fatal(err)
		}
	}
	// The Manager as the chart's ServiceAccount, with the limit the chart gave it; and the same
	// Manager with its own check bypassed.
	m := newChartManager(t, api.URL, env.Token, cpPub)
	sa := m.client
	honest := m.agent(protocol.Limits{Namespaces: []string{"shop"}, ImageRepositories: []string{allowedRepository}})
	bypassed := m.agent(protocol.Limits{Namespaces: []string{protocol.AllowAll}, ImageRepositories: []string{protocol.AllowAll}})
	round := func(a *manager.Agent) {
		t.Helper()
		if _, err := a.Round(ctx); err != nil {
			t.Fatalf("heartbeat as the nexo-manager ServiceAccount: %v", err)
		}
	}
	lastCommand := func() controlplane.CommandView {
		t.Helper()
		var view controlplane.EnvironmentView
		if err := api.Do("GET", "/admin/environments/"+env.ID, nil, &view); err != nil {
			t.Fatal(err)
		}
		if len(view.Commands) == 0 {
			t.Fatal("no command")
		}
		last := view.Commands[0]
		for _, c := range view.Commands {
			if c.Seq > last.Seq {
				last = c
			}
		}
		return last
	}
	manifest := func(ns, name string) json.RawMessage {
		raw, _ := json.Marshal(map[string]any{"apiVersion": "nexo.io/v1alpha1", "kind": "NexoRateLimit",
			"metadata": map[string]any{"name": name, "namespace": ns}, "spec": map[string]any{"operationsPerSecond": 3}})
		return raw
	}
	absent := func(ns, name string) {
		t.Helper()
		if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &nexov1alpha1.NexoRateLimit{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s/%s exists (%v): a refused deploy wrote something", ns, name, err)
		}
	}
	adminDeploy := func(ns, name string) {
		t.Helper()
		if err := api.Do("POST", "/admin/environments/"+env.ID+"/commands", protocol.Command{Type: protocol.Deploy, Namespaces: []string{ns}, Manifests: []json.RawMessage{manifest(ns, name)}}, nil); err != nil {
			t.Fatal(err)
		}
	}
	round(honest) // the heartbeat that reports the limit

	// 1. The Control Plane refuses: elsewhere is eligible, and refused by the cluster.
	err := api.Do("POST", acme+"/projects/shop/stages/prod/deploy", controlplane.StageDeploy{Environment: env.ID, Namespace: "elsewhere", Manifests: []json.RawMessage{manifest("elsewhere", "via-stage")}}, nil)
	if err == nil || !strings.Contains(err.Error(), "409") || !strings.Contains(err.Error(), "refused by the cluster") {
		t.Errorf("a stage deploy into elsewhere: %v, want 409 eligible, refused by the cluster", err)
	}
	err = api.Do("POST", acme+"/projects/shop/stages/prod/rollout", controlplane.StageRollout{Environment: env.ID, Image: "evil.example.com/miner:1"}, nil)
	if err == nil || !strings.Contains(err.Error(), "409") || !strings.Contains(err.Error(), "refused by the cluster") {
		t.Errorf("a stage rollout of a disallowed repository: %v, want 409 eligible, refused by the cluster", err)
	}
	// Inside the limit the same stage deploys, and the honest Manager applies it through RBAC and
	// both admission policies.
	if err := api.Do("POST", acme+"/projects/shop/stages/prod/deploy", controlplane.StageDeploy{Environment: env.ID, Namespace: "shop", Manifests: []json.RawMessage{manifest("shop", "via-stage")}}, nil); err != nil {
		t.Fatalf("a stage deploy into shop: %v", err)
	}
	round(honest)
	if c := lastCommand(); c.Status != protocol.Applied {
		t.Fatalf("deploy into shop: %s %s", c.Status, c.Message)
	}
	absent("elsewhere", "via-stage")

	// 2. The Manager refuses what the admin token queued, before writing.
	adminDeploy("elsewhere", "via-admin")
	round(honest)
	if c := lastCommand(); c.Status != protocol.Failed || !strings.Contains(c.Message, "outside this cluster's deploy limit") || !strings.Contains(c.Message, "manager.deployNamespaces") {
		t.Errorf("the Manager applying a deploy into elsewhere: %s %q, want failed naming the limit and where it is set", c.Status, c.Message)
	}
	absent("elsewhere", "via-admin")
	if err := api.Do("POST", "/admin/environments/"+env.ID+"/commands", protocol.Command{Type: protocol.Rollout, Image: "evil.example.com/miner:1"}, nil); err != nil {
		t.Fatal(err)
	}
	round(honest)
	if c := lastCommand(); c.Status != protocol.Failed || !strings.Contains(c.Message, "outside this cluster's image repositories") {
		t.Errorf("the Manager applying a rollout of evil.example.com/miner: %s %q", c.Status, c.Message)
	}

	// 3. The API server refuses the Manager whose own check is bypassed: first RBAC, which
	// grants its writes in shop only...
	adminDeploy("elsewhere", "bypassed-rbac")
	round(bypassed)
	if c := lastCommand(); c.Status != protocol.Failed || !strings.Contains(c.Message, "forbidden") {
		t.Errorf("a Manager without its check, deploying into elsewhere under the chart's RBAC: %s %q, want failed, forbidden", c.Status, c.Message)
	}
	absent("elsewhere", "bypassed-rbac")

	// ...then admission, with RBAC granted wider than the limit (a cluster-wide binding of the
	// Manager's write role, as a mistaken admin might add).
	wide := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "too-wide-manager-writes"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "nexo-manager-deploy-" + testinstall.Namespace},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "nexo-manager", Namespace: testinstall.Namespace}}}
	if err := admin.Create(ctx, wide); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Delete(ctx, wide) })
	waitAllowed(t, ctx, "create", "elsewhere")
	adminDeploy("elsewhere", "bypassed-admission")
	round(bypassed)
	if c := lastCommand(); c.Status != protocol.Failed || !strings.Contains(c.Message, "outside this cluster's deploy limit") || !strings.Contains(c.Message, "the Control Plane cannot change") {
		t.Errorf("a Manager without its check, deploying into elsewhere with RBAC granted: %s %q, want failed by the admission policy", c.Status, c.Message)
	}
	absent("elsewhere", "bypassed-admission")

	// The Manager's credentials used directly: a create, and a delete of a NexoProxy there (the
	// one kind it may delete).
	direct := rateLimit("direct")
	direct.Namespace = "elsewhere"
	if err := sa.Create(ctx, direct.DeepCopy()); err == nil || !strings.Contains(err.Error(), "outside this cluster's deploy limit") {
		t.Errorf("the Manager's ServiceAccount creating in elsewhere: %v, want refused by admission", err)
	}
	theirs := proxy("elsewhere", "theirs", "")
	if err := admin.Create(ctx, theirs.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	if err := sa.Delete(ctx, theirs.DeepCopy()); err == nil || !strings.Contains(err.Error(), "may not delete") {
		t.Errorf("the Manager's ServiceAccount deleting in elsewhere: %v, want refused by admission", err)
	}
	_ = admin.Delete(ctx, theirs)

	// A proxy image: inside the limit's namespaces, only from the allowed repository, compared
	// whole (a longer name sharing its prefix is another repository), with or without a tag or
	// digest.
	digest := "@sha256:" + strings.Repeat("a", 64)
	for i, c := range []struct {
		image   string
		allowed bool
	}{
		{"evil.example.com/miner:1", false},
		{allowedRepository + "-evil:1", false},
		{allowedRepository + "/sub:1", false},
		{"registry.example.com/nexo:1", false},
		{allowedRepository + ":0.3.1", true},
		{allowedRepository + digest, true},
		{allowedRepository + ":0.3.1" + digest, true},
		{allowedRepository, true},
	} {
		p := proxy("shop", fmt.Sprintf("image-%d", i), c.image)
		err := sa.Create(ctx, p)
		switch {
		case c.allowed && err != nil:
			t.Errorf("the Manager's ServiceAccount setting %s: %v", c.image, err)
		case !c.allowed && (err == nil || !strings.Contains(err.Error(), "outside this cluster's image repositories")):
			t.Errorf("the Manager's ServiceAccount setting %s: %v, want refused by admission", c.image, err)
		}
		_ = admin.Delete(ctx, p)
	}

	// Nobody but the Manager is held by it: an admin writes in elsewhere as before.
	if err := admin.Create(ctx, proxy("elsewhere", "admins", "evil.example.com/miner:1")); err != nil {
		t.Errorf("the deploy limit held a cluster admin: %v", err)
	}
	_ = admin.Delete(ctx, proxy("elsewhere", "admins", ""))
}

// proxy is a NexoProxy in ns, with image as its spec.proxyImage when set.
func proxy(ns, name, image string) *nexov1alpha1.NexoProxy {
	return &nexov1alpha1.NexoProxy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: nexov1alpha1.NexoProxySpec{
		PipelineRef: nexov1alpha1.LocalObjectReference{Name: "p"}, ProfileRef: nexov1alpha1.LocalObjectReference{Name: "p"}, LicenseRef: nexov1alpha1.LocalObjectReference{Name: "l"},
		Upstream: nexov1alpha1.Target{Name: "db", Address: "db:27017"}, ProxyImage: nexov1alpha1.Image(image)}}
}

// waitAllowed waits until RBAC lets the Manager's ServiceAccount verb NexoRateLimits in ns (a new
// binding reaches the authorizer's cache within moments).
func waitAllowed(t *testing.T, ctx context.Context, verb, ns string) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		r, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: admission.ManagerUser(testinstall.Namespace), Groups: []string{"system:serviceaccounts", "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb, Group: "nexo.io", Resource: "nexoratelimits"}}}, metav1.CreateOptions{})
		return err == nil && r.Status.Allowed, nil
	}); err != nil {
		t.Fatalf("RBAC never allowed the Manager to %s in %s", verb, ns)
	}
}
