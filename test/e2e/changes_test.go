package e2e_test

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/catalog"
	"github.com/nexo-io/nexo-edge/contract/license"
	"github.com/nexo-io/nexo-edge/contract/manifest"
	"github.com/nexo-io/nexo-edge/contract/protocol"
	"github.com/nexo-io/nexo-edge/controlplane"
	"github.com/nexo-io/nexo-edge/controlplane/storage"
	"github.com/nexo-io/nexo-edge/test/framework/reliabilityreport"
	"github.com/nexo-io/nexo-edge/test/framework/testcluster"
)

// changeFlow is what the change-management steps share with the hosted path: the Control
// Plane's URL and CLI, the environment (registered in tenant acme), the test's folder, and the
// license authority's key.
type changeFlow struct {
	cpURL, envID, dir string
	admin             controlplane.AdminClient
	cli               func(args ...string) string
	vendorKey         ed25519.PrivateKey
	step              func(name string, f func(t *testing.T))
}

const acmeShop = "/admin/tenants/acme/projects/shop"

// changeGraph is revision content: three proxies, cm-a and cm-b on pipeline cm-ab (router
// cm-router), cm-c on pipeline cm-c (router cm-router-c); primary is cm-router's address.
func changeGraph(primary string, extra string) string {
	return strings.ReplaceAll(`apiVersion: nexo.io/v1alpha1
kind: NexoDeploymentProfile
metadata: {name: cm-standard, namespace: shop}
spec:
  images: {ingress: registry.example.com/nexo/ingress:0.2.0, egress: registry.example.com/nexo/egress:0.2.0}
  defaults: {replicas: 1}
---
apiVersion: nexo.io/v1alpha1
kind: NexoLicense
metadata: {name: cm-license, namespace: shop}
spec:
  secretRef: {name: cm-license, key: license}
  expectedLicensee: Acme Corp
---
apiVersion: nexo.io/v1alpha1
kind: NexoRouter
metadata: {name: cm-router, namespace: shop}
spec:
  targets: [{name: primary, address: "PRIMARY"}]
  defaultTarget: primary
---
apiVersion: nexo.io/v1alpha1
kind: NexoRouter
metadata: {name: cm-router-c, namespace: shop}
spec:
  targets: [{name: primary, address: "mongo-c.db.svc:27017"}]
  defaultTarget: primary
---
apiVersion: nexo.io/v1alpha1
kind: NexoPipeline
metadata: {name: cm-ab, namespace: shop}
spec:
  router: {kind: NexoRouter, name: cm-router}
---
apiVersion: nexo.io/v1alpha1
kind: NexoPipeline
metadata: {name: cm-c, namespace: shop}
spec:
  router: {kind: NexoRouter, name: cm-router-c}
---
apiVersion: nexo.io/v1alpha1
kind: NexoProxy
metadata: {name: cm-a, namespace: shop}
spec: {pipelineRef: {name: cm-ab}, upstream: {name: primary, address: "mongo-0.db.svc:27017"}, profileRef: {name: cm-standard}, licenseRef: {name: cm-license}, replicas: 1}
---
apiVersion: nexo.io/v1alpha1
kind: NexoProxy
metadata: {name: cm-b, namespace: shop}
spec: {pipelineRef: {name: cm-ab}, upstream: {name: primary, address: "mongo-0.db.svc:27017"}, profileRef: {name: cm-standard}, licenseRef: {name: cm-license}, replicas: 1}
---
apiVersion: nexo.io/v1alpha1
kind: NexoProxy
metadata: {name: cm-c, namespace: shop}
spec: {pipelineRef: {name: cm-c}, upstream: {name: primary, address: "mongo-c.db.svc:27017"}, profileRef: {name: cm-standard}, licenseRef: {name: cm-license}, replicas: 1}
`, "PRIMARY", primary) + extra
}

var changeProxies = []string{"cm-a", "cm-b", "cm-c"}

// proxyState is what a change does to one proxy: the graph revision it runs and its
// Deployment's generation (a pod-template change bumps it: the pods roll).
type proxyState struct {
	graphRevision string
	generation    int64
}

func proxyStates(t *testing.T) map[string]proxyState {
	t.Helper()
	out := map[string]proxyState{}
	for _, name := range changeProxies {
		p := &nexov1alpha1.NexoProxy{}
		d := &appsv1.Deployment{}
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: "shop", Name: name}, p); err != nil {
			t.Fatal(err)
		}
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: "shop", Name: name}, d); err != nil {
			t.Fatal(err)
		}
		out[name] = proxyState{graphRevision: p.Status.GraphRevision, generation: d.Generation}
	}
	return out
}

// resourceVersions are the resourceVersions of every Nexo object, Deployment and ConfigMap in
// shop: a preview must leave all of them as they are.
func resourceVersions(t *testing.T) map[string]string {
	t.Helper()
	out, err := testcluster.ResourceVersions(context.Background(), k8s, "shop", &appsv1.DeploymentList{}, &corev1.ConfigMapList{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// changeManagement runs a project's change lifecycle on the hosted path, through the real
// Control Plane, Manager and operator (the chart's ServiceAccounts): revisions, a preview that
// predicts exactly the deploy and writes nothing, the compatibility gate, a freeze, a rollback
// and a promotion, all audited.
func changeManagement(f changeFlow) {
	ctx := context.Background()
	as := map[string]controlplane.AdminClient{}
	revision := map[int]int64{}
	var before map[string]proxyState // what revision 1 runs
	waitSynced := func(t *testing.T, stage string, rev int64) controlplane.StageRun {
		t.Helper()
		var run controlplane.StageRun
		poll(t, fmt.Sprintf("stage %s runs revision %d Synced", stage, rev), 2*time.Minute, func() (bool, string) {
			var out struct{ Environments []controlplane.StageRun }
			if err := as["carol"].Do("GET", acmeShop+"/stages/"+stage+"/status", nil, &out); err != nil || len(out.Environments) != 1 {
				return false, fmt.Sprint(err, out)
			}
			run = out.Environments[0]
			return run.Revision == rev && run.State == controlplane.RunSynced && run.SyncedSince != nil, fmt.Sprintf("%+v", run)
		})
		return run
	}
	newRevision := func(t *testing.T, n int, content string) {
		t.Helper()
		file := filepath.Join(f.dir, fmt.Sprintf("revision-%d.yaml", n))
		_ = os.WriteFile(file, []byte(content), 0o644)
		objs, err := manifest.Load(file, nil)
		if err != nil {
			t.Fatal(err)
		}
		req := controlplane.NewRevision{Message: fmt.Sprintf("change %d", n)}
		for _, o := range objs {
			raw, _ := o.MarshalJSON()
			req.Manifests = append(req.Manifests, raw)
		}
		var rev controlplane.RevisionView
		if err := as["carol"].Do("POST", acmeShop+"/revisions", req, &rev); err != nil {
			t.Fatal(err)
		}
		revision[n] = rev.Number
	}
	deploy := func(t *testing.T, n int) controlplane.DeployAnswer {
		t.Helper()
		var ans controlplane.DeployAnswer
		if err := as["carol"].Do("POST", acmeShop+"/stages/canary/deploy", controlplane.StageDeploy{Environment: f.envID, Revision: revision[n]}, &ans); err != nil {
			t.Fatal(err)
		}
		return ans
	}

	f.step("change management: a project, its stages and people", func(t *testing.T) {
		if err := f.admin.Do("POST", "/admin/tenants/acme/projects", map[string]string{"name": "shop"}, nil); err != nil {
			t.Fatal(err)
		}
		for name, binding := range map[string][2]string{"alice": {"tenant-admin", ""}, "bob": {"project-manager", "shop"}, "carol": {"editor", "shop"}} {
			var p controlplane.NewPrincipal
			if err := f.admin.Do("POST", "/admin/tenants/acme/principals", map[string]string{"name": name}, &p); err != nil {
				t.Fatal(err)
			}
			if err := f.admin.Do("POST", "/admin/tenants/acme/role-bindings", map[string]string{"principal": name, "role": binding[0], "project": binding[1]}, nil); err != nil {
				t.Fatal(err)
			}
			as[name] = controlplane.AdminClient{URL: f.cpURL, Token: p.Token}
			_ = os.WriteFile(filepath.Join(f.dir, name+"-token"), []byte(p.Token), 0o600)
		}
		for _, c := range []struct {
			who, method, path string
			body              any
		}{
			{"alice", "PUT", "/admin/tenants/acme/environments/" + f.envID + "/labels", map[string]any{"labels": map[string]string{"env": "e2e"}}},
			{"alice", "PUT", "/admin/tenants/acme/environments/" + f.envID + "/namespace-targets/shop", map[string]any{"labels": map[string]string{"tier": "web"}}},
			{"alice", "PUT", "/admin/tenants/acme/entitlement", nil},
			{"bob", "PUT", acmeShop + "/stages/canary", controlplane.StageSpec{Environments: map[string]string{"env": "e2e"}, Namespaces: map[string]string{"tier": "web"}}},
			{"bob", "PUT", acmeShop + "/stages/prod", controlplane.StageSpec{Environments: map[string]string{"env": "e2e"}, Namespaces: map[string]string{"tier": "web"},
				PromotesFrom: "canary", SoakSeconds: 10, RequiresApproval: true}},
		} {
			if c.path == "/admin/tenants/acme/entitlement" {
				if err := f.admin.Do("PUT", c.path, map[string]any{"maxProxies": 20, "expiresAt": time.Now().Add(24 * time.Hour)}, nil); err != nil {
					t.Fatal(err)
				}
				continue
			}
			if err := as[c.who].Do(c.method, c.path, c.body, nil); err != nil {
				t.Fatal(err)
			}
		}
		// The customer's license for these proxies: its own document, so it counts apart.
		doc, _ := license.Issue(license.Claims{Licensee: "Acme Corp", ExpiresAt: time.Now().Add(24 * time.Hour), MaxProxies: 10}, f.vendorKey)
		if err := k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "cm-license", Namespace: "shop"}, Data: map[string][]byte{"license": []byte(doc)}}); err != nil {
			t.Fatal(err)
		}
	})

	f.step("change management: revision 1 runs Synced through canary", func(t *testing.T) {
		newRevision(t, 1, changeGraph("mongo-0.db.svc:27017", ""))
		deploy(t, 1)
		run := waitSynced(t, "canary", revision[1])
		before = proxyStates(t)
		for _, p := range run.Proxies {
			if p.Predicted == "" || p.Predicted != before[p.Name].graphRevision {
				t.Errorf("%s: the deploy predicted %q, the operator rendered %q", p.Name, p.Predicted, before[p.Name].graphRevision)
			}
		}
	})

	f.step("change management: a preview predicts the deploy exactly and writes nothing", func(t *testing.T) {
		newRevision(t, 2, changeGraph("mongo-1.db.svc:27017", ""))
		rvs := resourceVersions(t)
		out := f.cli("--token-file", filepath.Join(f.dir, "carol-token"), "stage", "preview", "canary", "--tenant", "acme", "--project", "shop",
			"--env", f.envID, "--revision", fmt.Sprint(revision[2]), "--wait")
		m := regexp.MustCompile(`preview (\S+) queued`).FindStringSubmatch(out)
		if m == nil || !regexp.MustCompile(`shop/cm-a\s+\S+\s+\S+\s+rolls`).MatchString(out) {
			t.Fatalf("stage preview --wait:\n%s", out)
		}
		var view controlplane.PreviewView
		if err := as["carol"].Do("GET", acmeShop+"/previews/"+m[1], nil, &view); err != nil || view.Result == nil {
			t.Fatalf("the preview: %v %+v", err, view)
		}
		predicted := map[string]protocol.ProxyPreview{}
		for _, p := range view.Result.Proxies {
			predicted[p.Name] = p
		}
		for _, name := range changeProxies {
			p, ok := predicted[name]
			want := protocol.ProxyRolls
			if name == "cm-c" {
				want = protocol.ProxyUnchanged
			}
			if !ok || p.Outcome != want || p.Before != before[name].graphRevision || (want == protocol.ProxyRolls) == (p.After == p.Before) {
				t.Errorf("%s: predicted %+v, want %s from %s", name, p, want, before[name].graphRevision)
			}
		}
		if s := view.Result.Summary; s.Changed != 1 || s.Created != 0 || s.Refused != 0 || s.Rolls != 2 {
			t.Errorf("summary %+v: want cm-router changed, two proxies rolling", s)
		}
		after := resourceVersions(t)
		for k, v := range rvs {
			if after[k] != v {
				t.Errorf("the preview wrote %s (resourceVersion %s → %s)", k, v, after[k])
			}
		}
		if len(after) != len(rvs) {
			t.Errorf("the preview changed the set of objects: %d → %d", len(rvs), len(after))
		}

		ans := deploy(t, 2)
		if ans.Preview == nil || ans.Preview.ID != m[1] || ans.Preview.EnvironmentChanged {
			t.Errorf("the deploy of the previewed revision: %+v", ans.Preview)
		}
		waitSynced(t, "canary", revision[2])
		now := proxyStates(t)
		for _, name := range changeProxies {
			p := predicted[name]
			rolled := now[name].generation != before[name].generation
			if now[name].graphRevision != p.After || rolled != (p.Outcome == protocol.ProxyRolls) {
				t.Errorf("%s: runs %s (pods rolled: %v); the preview said %s, %s", name, now[name].graphRevision, rolled, p.After, p.Outcome)
			}
		}
		reliabilityreport.Figure(t, "preview of three proxies, then their deploy", fmt.Sprintf("%d of 3 graph revisions and pod rolls as predicted; %d resourceVersions unchanged by the preview", 3, len(rvs)))
	})

	f.step("change management: a schema-only kind is refused before queueing, naming the bundle", func(t *testing.T) {
		newRevision(t, 3, changeGraph("mongo-1.db.svc:27017", "---\napiVersion: nexo.io/v1alpha1\nkind: NexoQueryGuard\nmetadata: {name: cm-guard, namespace: shop}\nspec: {maxFilterDepth: 8}\n"))
		var envView controlplane.EnvironmentView
		_ = f.admin.Do("GET", "/admin/environments/"+f.envID, nil, &envView)
		queued := len(envView.Commands)
		err := as["carol"].Do("POST", acmeShop+"/stages/canary/deploy", controlplane.StageDeploy{Environment: f.envID, Revision: revision[3]}, nil)
		if err == nil || !strings.Contains(err.Error(), "409") || !strings.Contains(err.Error(), "NexoQueryGuard") ||
			!strings.Contains(err.Error(), "schema-only in environment "+f.envID) || !strings.Contains(err.Error(), "bundle "+catalog.BuildVersion+", installed by helm") {
			t.Fatalf("deploy of a schema-only kind: %v", err)
		}
		_ = f.admin.Do("GET", "/admin/environments/"+f.envID, nil, &envView)
		if len(envView.Commands) != queued {
			t.Errorf("the refused deploy queued a command")
		}
	})

	f.step("change management: a frozen stage refuses", func(t *testing.T) {
		if err := as["bob"].Do("PUT", acmeShop+"/stages/canary/freeze", controlplane.FreezeRequest{Reason: "incident 7: connection storms"}, nil); err != nil {
			t.Fatal(err)
		}
		err := as["carol"].Do("POST", acmeShop+"/stages/canary/deploy", controlplane.StageDeploy{Environment: f.envID, Revision: revision[1]}, nil)
		if err == nil || !strings.Contains(err.Error(), "incident 7: connection storms") {
			t.Fatalf("deploy into a frozen stage: %v", err)
		}
		var h controlplane.EnvironmentHealth
		if err := as["carol"].Do("GET", "/admin/tenants/acme/environments/"+f.envID+"/health", nil, &h); err != nil || h.State != controlplane.StateHealthy || !h.PromotionContract || h.BundleVersion != catalog.BuildVersion {
			t.Errorf("the environment's health, as an editor: %v %+v", err, h)
		}
		if err := as["bob"].Do("DELETE", acmeShop+"/stages/canary/freeze", nil, nil); err != nil {
			t.Fatal(err)
		}
	})

	f.step("change management: rollback returns to revision 1's graph revisions and nothing else rolls", func(t *testing.T) {
		mid := proxyStates(t)
		var ans controlplane.DeployAnswer
		if err := as["bob"].Do("POST", acmeShop+"/stages/canary/rollback", controlplane.StageRollback{Environment: f.envID, To: revision[1]}, &ans); err != nil {
			t.Fatal(err)
		}
		waitSynced(t, "canary", revision[1])
		now := proxyStates(t)
		for _, name := range changeProxies {
			if now[name].graphRevision != before[name].graphRevision {
				t.Errorf("%s runs %s after the rollback, revision 1 ran %s", name, now[name].graphRevision, before[name].graphRevision)
			}
		}
		if now["cm-c"].generation != mid["cm-c"].generation {
			t.Errorf("cm-c, untouched by revisions 1 and 2, rolled on the rollback")
		}
	})

	f.step("change management: promotion waits for the soak and another manager's approval", func(t *testing.T) {
		promote := func() (storage.PromotionRecord, error) {
			var rec storage.PromotionRecord
			err := as["bob"].Do("POST", acmeShop+"/stages/prod/promote", controlplane.StagePromote{Revision: revision[1]}, &rec)
			return rec, err
		}
		run := waitSynced(t, "canary", revision[1])
		if _, err := promote(); err == nil || !strings.Contains(err.Error(), "soak") {
			t.Fatalf("promotion %s after canary turned Synced, before the 10s soak: %v", time.Since(*run.SyncedSince).Truncate(time.Millisecond), err)
		}
		time.Sleep(time.Until(run.SyncedSince.Add(11 * time.Second)))
		rec, err := promote()
		if err != nil || rec.State != storage.PromotionAwaitingApproval {
			t.Fatalf("promotion after the soak: %v %+v", err, rec)
		}
		if err := as["bob"].Do("POST", acmeShop+"/promotions/"+rec.ID+"/approve", nil, nil); err == nil || !strings.Contains(err.Error(), "other than its promoter") {
			t.Errorf("the promoter approves: %v", err)
		}
		states := proxyStates(t)
		if err := as["alice"].Do("POST", acmeShop+"/promotions/"+rec.ID+"/approve", nil, &rec); err != nil || rec.State != storage.PromotionQueued || len(rec.Targets) != 1 {
			t.Fatalf("alice approves: %v %+v", err, rec)
		}
		waitSynced(t, "prod", revision[1])
		for name, s := range proxyStates(t) {
			if s != states[name] {
				t.Errorf("%s changed when prod took the revision canary already ran: %+v → %+v", name, states[name], s)
			}
		}
	})

	f.step("change management: every step is audited", func(t *testing.T) {
		var page controlplane.AuditPage
		if err := as["alice"].Do("GET", "/admin/tenants/acme/audit?limit=1000", nil, &page); err != nil {
			t.Fatal(err)
		}
		has := func(action, decision, says string) bool {
			return slices.ContainsFunc(page.Records, func(r storage.AuditRecord) bool {
				return r.Action == action && r.Decision == decision && strings.Contains(r.Reason, says)
			})
		}
		for _, c := range []struct{ action, decision, says string }{
			{"revision.create", storage.Allowed, "revision 1"}, {"preview", storage.Allowed, ""}, {"deploy", storage.Allowed, ""},
			{"deploy", storage.Refused, "schema-only"}, {"deploy", storage.Refused, "incident 7"}, {"stage.freeze", storage.Allowed, "frozen: incident 7"},
			{"stage.freeze", storage.Allowed, "freeze lifted"}, {"rollback", storage.Allowed, "rollback of"}, {"promotion.promote", storage.Refused, "soak"},
			{"promotion.promote", storage.Allowed, "awaiting"}, {"promotion.approve", storage.Refused, "promoter"}, {"promotion.approve", storage.Allowed, "queued"},
			{"command.ack", storage.Allowed, "applied"},
		} {
			if !has(c.action, c.decision, c.says) {
				t.Errorf("no %s %s record saying %q", c.decision, c.action, c.says)
			}
		}
	})

	f.step("change management: the project's proxies go", func(t *testing.T) {
		for _, name := range changeProxies {
			if err := as["bob"].Do("POST", acmeShop+"/stages/canary/uninstall", controlplane.StageUninstall{Environment: f.envID, Namespace: "shop", Name: name}, nil); err != nil {
				t.Fatal(err)
			}
		}
		poll(t, "the project's proxies are gone", time.Minute, func() (bool, string) {
			for _, name := range changeProxies {
				if err := k8s.Get(ctx, client.ObjectKey{Namespace: "shop", Name: name}, &nexov1alpha1.NexoProxy{}); !apierrors.IsNotFound(err) {
					return false, name + ": " + fmt.Sprint(err)
				}
			}
			return true, ""
		})
	})
}
