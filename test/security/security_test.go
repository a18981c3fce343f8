// Package security_test checks the trust boundaries of docs/security.md on a real API server, with
// the product installed by its own chart: the effective permissions of its ServiceAccounts
// (SubjectAccessReview against docs/rbac.md), the admission policy that reserves managed objects
// to the Manager, and the Manager working under its own RBAC.
package security_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/catalog"
	"github.com/nexo-io/nexo-edge/contract/protocol"
	"github.com/nexo-io/nexo-edge/contract/scheme"
	"github.com/nexo-io/nexo-edge/contract/signature"
	"github.com/nexo-io/nexo-edge/contract/wire"
	"github.com/nexo-io/nexo-edge/controlplane"
	"github.com/nexo-io/nexo-edge/manager"
	"github.com/nexo-io/nexo-edge/operator"
	"github.com/nexo-io/nexo-edge/test/framework/rbacdoc"
	"github.com/nexo-io/nexo-edge/test/framework/testcluster"
	"github.com/nexo-io/nexo-edge/test/framework/testcontrolplane"
	"github.com/nexo-io/nexo-edge/test/framework/testinstall"
)

var (
	cluster *testcluster.Cluster
	admin   client.Client
	// namespaced is installed in nexo-system watching only shop; wide in nexo-wide watching all
	// namespaces, with pull-Secret copies allowed in shop.
	namespaced = install{release: testinstall.Namespace, watched: []string{"shop"}}
	wide       = install{release: "nexo-wide", copies: []string{"shop"}}
	// staging and prod are two environments of one cluster (TestInstallationsSideBySide).
	staging = install{release: "nexo-staging", watched: []string{"shop-staging"}}
	prod    = install{release: "nexo-prod", watched: []string{"shop-prod"}}
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	ctx := context.Background()
	var err error
	cluster, err = testcluster.Start(ctx, testcluster.Options{Mode: testcluster.Envtest, CRDDirectoryPaths: []string{testcluster.CRDDir()}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cluster.Stop()
	s := scheme.New()
	_ = apiextensionsv1.AddToScheme(s)
	if admin, err = client.New(cluster.Config, client.Options{Scheme: s}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for _, ns := range []string{"shop", "elsewhere", "shop-staging", "shop-prod"} {
		if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	if err := testinstall.Chart(cluster, namespaced.release, testinstall.Values("0123456789ab", namespaced.watched, nil)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := testinstall.Chart(cluster, wide.release, testinstall.Values("ba9876543210", nil, map[string]any{
		"operator":        map[string]any{"secretCopyNamespaces": []any{"shop"}},
		"admissionPolicy": map[string]any{"enabled": false}, // it serves every namespace: its binding would overlap the others
	})); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// Two more installations side by side, each with the admission policy on (the default): they
	// share the cluster's policy and bind it for their own namespaces.
	for _, in := range []install{staging, prod} {
		if err := testinstall.Chart(cluster, in.release, testinstall.Values("5747a9143000", in.watched, nil)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return m.Run()
}

// TestEffectivePermissionsMatchTheDocs: what the chart's ServiceAccounts may do, asked of the
// API server for every served resource, verb and namespace, is exactly docs/rbac.md's table, in
// both install modes. In particular no install grants a Secret write cluster-wide, and the
// Manager writes no status and deletes nothing but NexoProxies.
func TestEffectivePermissionsMatchTheDocs(t *testing.T) {
	cs, err := kubernetes.NewForConfig(cluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	rules, err := rbacdoc.Rules("The rules")
	if err != nil {
		t.Fatal(err)
	}
	resources, err := rbacdoc.ServedResources(cs)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []install{namespaced, wide} {
		for _, who := range []string{"operator", "manager"} {
			t.Run(in.release+"/"+who, func(t *testing.T) { checkMatrix(t, cs, rules, in, who, resources) })
		}
	}
}

// asTenant is a client for the tenant of ns: edit rights on Nexo objects and Secrets there only.
func asTenant(t *testing.T, ns string) client.Client {
	t.Helper()
	return clientFor(t, func() (*rest.Config, error) { return testinstall.Tenant(context.Background(), cluster, ns) })
}

func clientFor(t *testing.T, cfg func() (*rest.Config, error)) client.Client {
	t.Helper()
	c, err := cfg()
	if err != nil {
		t.Fatal(err)
	}
	out, err := client.New(c, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func managerClient(t *testing.T) client.Client {
	return clientFor(t, func() (*rest.Config, error) { return testinstall.Manager(context.Background(), cluster) })
}

func rateLimit(name string) *nexov1alpha1.NexoRateLimit {
	return &nexov1alpha1.NexoRateLimit{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "shop"},
		Spec: nexov1alpha1.NexoRateLimitSpec{OperationsPerSecond: 5, Burst: 10}}
}

func signed(t *testing.T, key ed25519.PrivateKey, rl *nexov1alpha1.NexoRateLimit, rev int64) *nexov1alpha1.NexoRateLimit {
	t.Helper()
	if err := signature.Sign(rl, key, signature.Claims{Audience: "0123456789ab", Revision: rev}); err != nil {
		t.Fatal(err)
	}
	return rl
}

// TestOnlyTheManagerChangesManagedObjects: the ValidatingAdmissionPolicy the chart ships lets
// the Manager create and change a managed object, and refuses the tenant, and even a cluster
// admin, creating a managed object, editing its spec, dropping its managed-by label or its
// signature; unmanaged objects stay editable, a managed one deletable.
func TestOnlyTheManagerChangesManagedObjects(t *testing.T) {
	ctx := context.Background()
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	tenant := asTenant(t, "shop")
	mgr := managerClient(t)

	// The policy is loaded asynchronously after install: wait until it refuses.
	forged := signed(t, key, rateLimit("forged"), 1)
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		err := tenant.Create(ctx, forged.DeepCopy())
		if err == nil {
			_ = admin.Delete(ctx, forged.DeepCopy())
			return false, nil
		}
		return apierrors.IsForbidden(err) || apierrors.IsInvalid(err), nil
	}); err != nil {
		t.Fatal("the admission policy never refused a tenant creating a managed object")
	}
	err := tenant.Create(ctx, forged.DeepCopy())
	if err == nil || !strings.Contains(err.Error(), "only the Nexo Manager may create, change or un-manage it") || !strings.Contains(err.Error(), "tenant-shop") {
		t.Fatalf("tenant creating a managed object: %v", err)
	}

	managed := signed(t, key, rateLimit("managed"), 1)
	if err := mgr.Create(ctx, managed); err != nil {
		t.Fatalf("the Manager creating a managed object: %v", err)
	}
	for name, edit := range map[string]func(*nexov1alpha1.NexoRateLimit){
		"edit the spec":              func(o *nexov1alpha1.NexoRateLimit) { o.Spec.OperationsPerSecond = 500; o.Spec.Burst = 500 },
		"drop the managed-by label":  func(o *nexov1alpha1.NexoRateLimit) { delete(o.Labels, wire.ManagedByLabel) },
		"drop the signature":         func(o *nexov1alpha1.NexoRateLimit) { o.Annotations = nil },
		"drop label and signature":   func(o *nexov1alpha1.NexoRateLimit) { o.Labels, o.Annotations = nil, nil },
		"re-point the signing key":   func(o *nexov1alpha1.NexoRateLimit) { o.Annotations[wire.KeyIDAnnotation] = "0000000000000000" },
		"add an unrelated label too": func(o *nexov1alpha1.NexoRateLimit) { o.Labels["team"] = "x" },
	} {
		for who, c := range map[string]client.Client{"tenant": tenant, "cluster admin": admin} {
			o := &nexov1alpha1.NexoRateLimit{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(managed), o); err != nil {
				t.Fatal(err)
			}
			edit(o)
			if err := c.Update(ctx, o); err == nil || !strings.Contains(err.Error(), "only the Nexo Manager") {
				t.Errorf("%s could %s of a managed object: %v", who, name, err)
			}
		}
	}
	// The Manager may change it (a new signed revision).
	o := &nexov1alpha1.NexoRateLimit{}
	if err := mgr.Get(ctx, client.ObjectKeyFromObject(managed), o); err != nil {
		t.Fatal(err)
	}
	before := o.DeepCopy()
	o.Spec.OperationsPerSecond, o.Spec.Burst = 7, 14
	if err := mgr.Patch(ctx, signed(t, key, o, 2), client.MergeFrom(before)); err != nil {
		t.Errorf("the Manager changing a managed object: %v", err)
	}
	// Unmanaged objects are the tenant's to edit; a managed one may still be deleted.
	plain := rateLimit("plain")
	if err := tenant.Create(ctx, plain); err != nil {
		t.Fatalf("tenant creating an unmanaged object: %v", err)
	}
	plain.Spec.OperationsPerSecond, plain.Spec.Burst = 6, 12
	if err := tenant.Update(ctx, plain); err != nil {
		t.Errorf("tenant editing an unmanaged object: %v", err)
	}
	if err := tenant.Delete(ctx, o); err != nil {
		t.Errorf("tenant deleting a managed object: %v", err)
	}
	// The tenant still cannot read the operator namespace's Secrets.
	if err := tenant.Get(ctx, client.ObjectKey{Namespace: testinstall.Namespace, Name: wire.ConnectTokenSecret}, &corev1.Secret{}); !apierrors.IsForbidden(err) {
		t.Errorf("tenant reading a Secret of the operator namespace: %v, want Forbidden", err)
	}
}

// TestManagerWorksUnderItsOwnRBAC runs the Manager as the chart's nexo-manager ServiceAccount
// against the reference Control Plane: heartbeat with inventory, a deploy (dry run first, then
// apply, through the admission policy), a rollout, an uninstall, and the Lease.
func TestManagerWorksUnderItsOwnRBAC(t *testing.T) {
	ctx := context.Background()
	api, cpPub := startControlPlane(t)
	var env controlplane.NewEnvironment
	if err := api.Do("POST", "/admin/environments", map[string]string{"name": "security"}, &env); err != nil {
		t.Fatal(err)
	}
	m := newChartManager(t, api.URL, env.Token, cpPub)
	a := m.agent(protocol.Limits{Namespaces: []string{protocol.AllowAll}, ImageRepositories: []string{protocol.AllowAll}})
	cfg := m.cfg

	// The Lease: this Manager becomes the active one under its own RBAC.
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	leading := make(chan struct{})
	leaseCtx, stopLease := context.WithCancel(ctx)
	go manager.RunElected(leaseCtx, cs, testinstall.Namespace, "security-test", manager.LeaseTimings{Duration: 5 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: 500 * time.Millisecond},
		logr.Discard(), func(ctx context.Context) { close(leading); <-ctx.Done() })
	select {
	case <-leading:
	case <-time.After(30 * time.Second):
		t.Fatal("the Manager never acquired its Lease as its ServiceAccount")
	}
	stopLease()

	rl, _ := json.Marshal(map[string]any{"apiVersion": "nexo.io/v1alpha1", "kind": "NexoRateLimit",
		"metadata": map[string]any{"name": "from-cp", "namespace": "shop"}, "spec": map[string]any{"operationsPerSecond": 3}})
	var queued map[string]string
	if err := api.Do("POST", "/admin/environments/"+env.ID+"/commands", protocol.Command{Type: protocol.Deploy, Namespaces: []string{"shop"}, Manifests: []json.RawMessage{rl}}, &queued); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Round(ctx); err != nil {
		t.Fatalf("heartbeat as the nexo-manager ServiceAccount: %v", err)
	}
	var view controlplane.EnvironmentView
	if err := api.Do("GET", "/admin/environments/"+env.ID, nil, &view); err != nil {
		t.Fatal(err)
	}
	if len(view.Commands) != 1 || view.Commands[0].Status != protocol.Applied {
		t.Fatalf("deploy as the nexo-manager ServiceAccount: %+v", view.Commands)
	}
	got := &nexov1alpha1.NexoRateLimit{}
	if err := admin.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "from-cp"}, got); err != nil || got.Labels[wire.OwnerLabel] != "env-"+env.ID {
		t.Fatalf("deployed object %v (%v)", got.Labels, err)
	}
	if view.Inventory == nil || view.Inventory.ClusterID == "" || len(view.Inventory.InstalledKinds) == 0 {
		t.Errorf("inventory under the Manager's RBAC: %+v", view.Inventory)
	}
}

// startControlPlane runs the reference Control Plane with its SQLite file for the test, and
// returns an admin client and the public key it signs commands with.
func startControlPlane(t *testing.T) (controlplane.AdminClient, ed25519.PublicKey) {
	t.Helper()
	const adminToken = "security-test-admin-token"
	cp := testcontrolplane.StartT(t, testcontrolplane.Options{AdminToken: adminToken, NextHeartbeat: time.Second})
	return cp.Admin, cp.Key.Public().(ed25519.PublicKey)
}

// chartManager builds Managers that run as the chart's nexo-manager ServiceAccount and connect to
// the Control Plane at url with a connect token, trusting cpPub.
type chartManager struct {
	cfg       *rest.Config
	client    client.Client
	discovery discovery.DiscoveryInterface
	tokenFile string
	url       string
	trusted   ed25519.PublicKey
}

func newChartManager(t *testing.T, url, token string, cpPub ed25519.PublicKey) *chartManager {
	t.Helper()
	m := &chartManager{url: url, trusted: cpPub, tokenFile: filepath.Join(t.TempDir(), "token")}
	if err := os.WriteFile(m.tokenFile, []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	var err error
	if m.cfg, err = testinstall.Manager(context.Background(), cluster); err != nil {
		t.Fatal(err)
	}
	s := scheme.New()
	_ = apiextensionsv1.AddToScheme(s)
	if m.client, err = client.New(m.cfg, client.Options{Scheme: s}); err != nil {
		t.Fatal(err)
	}
	if m.discovery, err = discovery.NewDiscoveryClientForConfig(m.cfg); err != nil {
		t.Fatal(err)
	}
	return m
}

// agent is a Manager with limits as its own (the chart's RBAC and admission are the cluster's).
func (m *chartManager) agent(limits protocol.Limits) *manager.Agent {
	return manager.NewAgent(manager.Config{TokenFile: m.tokenFile, ControlPlaneURL: m.url, Namespace: testinstall.Namespace, Version: catalog.BuildVersion, Log: logr.Discard(), RESTConfig: m.cfg,
		Limits: limits, TrustedKeys: func() (map[string]ed25519.PublicKey, error) {
			return map[string]ed25519.PublicKey{signature.KeyID(m.trusted): m.trusted}, nil
		}}, m.client, m.discovery)
}

// TestOLMOperatorAppliesTheAdmissionPolicy: an OLM bundle cannot carry the policies, so the CSV
// runs the operator with --ensure-admission-policy and grants it the rules to apply them. Run as
// a ServiceAccount holding exactly the CSV's operator rules (clusterPermissions, and permissions
// in its namespace only: no right to read ConfigMaps cluster-wide), the operator creates the
// shared parameterized policy, and its installation's binding with its parameters (its
// namespace's Manager, the namespaces it serves), and cannot change another policy; a second run
// changes nothing, and a binding of its name with another spec is reported.
func TestOLMOperatorAppliesTheAdmissionPolicy(t *testing.T) {
	ctx := context.Background()
	csv := loadCSV(t)
	var clusterRules, nsRules []rbacv1.PolicyRule
	for _, p := range csv.Spec.InstallStrategy.StrategySpec.ClusterPermissions {
		if p.ServiceAccountName == "nexo-operator" {
			clusterRules = p.Rules
		}
	}
	for _, p := range csv.Spec.InstallStrategy.StrategySpec.Permissions {
		if p.ServiceAccountName == "nexo-operator" {
			nsRules = p.Rules
		}
	}
	const ns = "nexo-olm"
	subjects := []rbacv1.Subject{{Kind: "ServiceAccount", Name: "nexo-operator", Namespace: ns}}
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "nexo-operator", Namespace: ns}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "olm-nexo-operator"}, Rules: clusterRules},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "olm-nexo-operator"},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "olm-nexo-operator"}, Subjects: subjects},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "olm-nexo-operator", Namespace: ns}, Rules: nsRules},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "olm-nexo-operator", Namespace: ns},
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "olm-nexo-operator"}, Subjects: subjects},
	} {
		if err := admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "nexo-managed-objects-" + ns}}
	t.Cleanup(func() { _ = admin.Delete(ctx, binding) })
	// The Manager's limits, as the Subscription's config.env gives them to both Deployments.
	olmLimits := protocol.Limits{Namespaces: []string{"olm-proxies"}, ImageRepositories: []string{"registry.example.com/nexo/proxy"}}
	limitBinding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "nexo-manager-deploy-limit-" + ns}}
	t.Cleanup(func() { _ = admin.Delete(ctx, limitBinding) })
	sa := clientFor(t, func() (*rest.Config, error) { return cluster.ServiceAccountConfig(ctx, ns, "nexo-operator") })
	// It serves a namespace of its own, so the other installations' tests are not affected.
	for range 2 {
		if err := operator.ApplyAdmissionPolicy(ctx, sa, ns, []string{"olm-proxies"}, olmLimits); err != nil {
			t.Fatalf("applying the policies with the CSV's rules: %v", err)
		}
	}
	if err := admin.Get(ctx, client.ObjectKeyFromObject(binding), binding); err != nil || binding.Spec.ParamRef == nil ||
		binding.Spec.ParamRef.Name != binding.Name || binding.Spec.PolicyName != "nexo-managed-objects" {
		t.Fatalf("binding %+v (%v)", binding.Spec, err)
	}
	if binding.Annotations["nexo.io/admission-manager"] != "system:serviceaccount:"+ns+":nexo-manager" || binding.Annotations["nexo.io/admission-namespaces"] != "olm-proxies" {
		t.Errorf("binding parameters %v, want %s's Manager serving olm-proxies", binding.Annotations, ns)
	}
	// Its deploy-limit binding carries the Manager's limits from the same variables.
	if err := admin.Get(ctx, client.ObjectKeyFromObject(limitBinding), limitBinding); err != nil || limitBinding.Spec.PolicyName != "nexo-manager-deploy-limit" ||
		limitBinding.Spec.ParamRef == nil || limitBinding.Spec.ParamRef.Name != limitBinding.Name {
		t.Fatalf("deploy-limit binding %+v (%v)", limitBinding.Spec, err)
	}
	if a := limitBinding.Annotations; a["nexo.io/admission-manager"] != "system:serviceaccount:"+ns+":nexo-manager" ||
		a["nexo.io/admission-deploy-namespaces"] != "olm-proxies" || a["nexo.io/admission-image-repositories"] != "registry.example.com/nexo/proxy" {
		t.Errorf("deploy-limit binding parameters %v", a)
	}
	// A limit changed in config.env meets the old binding: reported, naming the parameter, and
	// the binding is left as it was (the operator may not patch it).
	wider := protocol.Limits{Namespaces: []string{"*"}, ImageRepositories: olmLimits.ImageRepositories}
	if err := operator.ApplyAdmissionPolicy(ctx, sa, ns, []string{"olm-proxies"}, wider); err == nil || !strings.Contains(err.Error(), "nexo.io/admission-deploy-namespaces") {
		t.Errorf("a changed limit: %v, want the differing parameter reported", err)
	}
	if err := admin.Get(ctx, client.ObjectKeyFromObject(limitBinding), limitBinding); err != nil || limitBinding.Annotations["nexo.io/admission-deploy-namespaces"] != "olm-proxies" {
		t.Errorf("the deploy-limit binding changed: %v (%v)", limitBinding.Annotations, err)
	}
	for _, name := range []string{"nexo-managed-objects", "nexo-manager-deploy-limit", "nexo-no-token-secrets"} {
		if err := admin.Get(ctx, client.ObjectKey{Name: name}, &admissionregistrationv1.ValidatingAdmissionPolicy{}); err != nil {
			t.Errorf("policy %s: %v", name, err)
		}
	}
	// The 0.2.0 binding, named as the policy and without parameters, is misconfigured under the
	// parameterized policy (every nexo.io write refused); the operator points it at its own
	// parameters, and writes pass again.
	legacy := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "nexo-managed-objects"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "nexo-managed-objects",
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}}}
	if err := admin.Create(ctx, legacy); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Delete(ctx, legacy) })
	if err := operator.ApplyAdmissionPolicy(ctx, sa, ns, []string{"olm-proxies"}, olmLimits); err != nil {
		t.Fatalf("with the 0.2.0 binding present: %v", err)
	}
	if err := admin.Get(ctx, client.ObjectKeyFromObject(legacy), legacy); err != nil || legacy.Spec.ParamRef == nil || legacy.Spec.ParamRef.Name != binding.Name {
		t.Fatalf("the 0.2.0 binding was not pointed at %s: %+v (%v)", binding.Name, legacy.Spec.ParamRef, err)
	}
	plain := rateLimit("after-legacy-fix")
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return admin.Create(ctx, plain.DeepCopy()) == nil, nil
	}); err != nil {
		t.Fatal("an unmanaged object is still refused after the 0.2.0 binding was fixed")
	}
	_ = admin.Delete(ctx, plain)
	if err := admin.Delete(ctx, legacy); err != nil {
		t.Fatal(err)
	}

	// Its binding changed by someone else: reported, not silently accepted.
	binding.Spec.ValidationActions = []admissionregistrationv1.ValidationAction{admissionregistrationv1.Audit}
	if err := admin.Update(ctx, binding); err != nil {
		t.Fatal(err)
	}
	if err := operator.ApplyAdmissionPolicy(ctx, sa, ns, []string{"olm-proxies"}, olmLimits); err == nil || !strings.Contains(err.Error(), "exists with another spec or parameters") {
		t.Errorf("a changed binding: %v, want it reported", err)
	}
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{}
	if err := admin.Get(ctx, client.ObjectKey{Name: "nexo-managed-objects"}, policy); err != nil {
		t.Fatal(err)
	}
	other := &admissionregistrationv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "something-else"}, Spec: *policy.Spec.DeepCopy()}
	if err := sa.Create(ctx, other); err == nil {
		// create cannot be limited by name; it must not be able to change it afterwards
		other.Spec.FailurePolicy = nil
		if err := sa.Update(ctx, other); !apierrors.IsForbidden(err) {
			t.Errorf("the operator could update another admission policy: %v", err)
		}
		_ = admin.Delete(ctx, other)
	}
}
