package controlplane_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nexo-io/nexo-edge/controlplane/authz"
	"github.com/nexo-io/nexo-edge/controlplane/storage"

	"github.com/nexo-io/nexo-edge/contract/protocol"
	"github.com/nexo-io/nexo-edge/controlplane"
	"github.com/nexo-io/nexo-edge/controlplane/targeting"
)

// tenancy is a Control Plane with tenant acme: principals of every role (alice tenant-admin,
// bob project-manager, carol editor, dave viewer of project shop), environment eu labelled
// env=production, team=payments, region=eu-west with namespace targets web (tier=web) and db
// (tier=data), and stage shop/prod selecting env=production, team=payments and tier=web.
type tenancy struct {
	*cp
	tokens map[targeting.Role]string
	env    controlplane.NewEnvironment
}

const acme = "/admin/tenants/acme"

func newTenancy(t *testing.T) *tenancy {
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	c := start(t, filepath.Join(t.TempDir(), "cp.db"), key)
	tn := &tenancy{cp: c, tokens: map[targeting.Role]string{}}
	must := func(code, want int, what string) {
		t.Helper()
		if code != want {
			t.Fatalf("%s: %d, want %d", what, code, want)
		}
	}
	must(c.do("POST", "/admin/tenants", admin, map[string]string{"name": "acme"}, nil), 201, "tenant acme")
	must(c.do("POST", "/admin/tenants", admin, map[string]string{"name": "globex"}, nil), 201, "tenant globex")
	must(c.do("POST", acme+"/projects", admin, map[string]string{"name": "shop"}, nil), 201, "project shop")
	for name, b := range map[string]storage.Binding{"alice": {Role: targeting.TenantAdmin}, "bob": {Role: targeting.ProjectManager, Project: "shop"},
		"carol": {Role: targeting.Editor, Project: "shop"}, "dave": {Role: targeting.Viewer, Project: "shop"}} {
		var p controlplane.NewPrincipal
		must(c.do("POST", acme+"/principals", admin, map[string]string{"name": name}, &p), 201, "principal "+name)
		must(c.do("POST", acme+"/role-bindings", admin, map[string]string{"principal": name, "role": string(b.Role), "project": b.Project}, nil), 200, "bind "+name)
		tn.tokens[b.Role] = p.Token
	}
	must(c.do("POST", acme+"/environments", tn.tokens[targeting.TenantAdmin], map[string]string{"name": "eu"}, &tn.env), 201, "environment eu")
	must(c.do("PUT", acme+"/environments/"+tn.env.ID+"/labels", tn.tokens[targeting.TenantAdmin],
		map[string]any{"labels": map[string]string{"env": "production", "team": "payments", "region": "eu-west"}}, nil), 200, "labels")
	for ns, tier := range map[string]string{"web": "web", "db": "data"} {
		must(c.do("PUT", acme+"/environments/"+tn.env.ID+"/namespace-targets/"+ns, tn.tokens[targeting.TenantAdmin], map[string]any{"labels": map[string]string{"tier": tier}}, nil), 200, "target "+ns)
	}
	must(c.do("PUT", acme+"/entitlement", admin, targeting.Entitlement{MaxProxies: 10, ExpiresAt: time.Now().Add(24 * time.Hour)}, nil), 200, "entitlement")
	must(c.do("PUT", acme+"/projects/shop/stages/prod", tn.tokens[targeting.ProjectManager],
		controlplane.StageSpec{Environments: map[string]string{"env": "production", "team": "payments"}, Namespaces: map[string]string{"tier": "web"}}, nil), 200, "stage prod")
	return tn
}

// heartbeat reports the cluster's limits for the environment (nil: none).
func (tn *tenancy) heartbeat(t *testing.T, limits *protocol.Limits) {
	hb := heartbeat("cluster-eu")
	hb.Limits = limits
	if code := tn.do("POST", "/v1/heartbeat", tn.env.Token, hb, nil); code != 200 {
		t.Fatalf("heartbeat: %d", code)
	}
}

// deployApplied deploys NexoProxies through stage shop/prod into web as the editor, and has the
// environment's Manager fetch and acknowledge them applied: they join the deployed set.
func (tn *tenancy) deployApplied(t *testing.T, names ...string) {
	t.Helper()
	tn.heartbeat(t, &protocol.Limits{Namespaces: []string{"*"}, ImageRepositories: []string{"*"}})
	var ms []json.RawMessage
	for _, n := range names {
		ms = append(ms, proxyIn("web", n))
	}
	var e protocol.Error
	if code := tn.do("POST", acme+"/projects/shop/stages/prod/deploy", tn.tokens[targeting.Editor], controlplane.StageDeploy{Environment: tn.env.ID, Namespace: "web", Manifests: ms}, &e); code != 201 {
		t.Fatalf("deploy %v: %d %s", names, code, e.Error)
	}
	tn.applyAll(t, tn.env)
}

// applyAll has env's Manager take its pending commands and acknowledge each applied.
func (c *cp) applyAll(t *testing.T, env controlplane.NewEnvironment) {
	t.Helper()
	hb := heartbeat("cluster-eu")
	hb.Limits = &protocol.Limits{Namespaces: []string{"*"}, ImageRepositories: []string{"*"}}
	var resp protocol.HeartbeatResponse
	if code := c.do("POST", "/v1/heartbeat", env.Token, hb, &resp); code != 200 {
		t.Fatalf("heartbeat: %d", code)
	}
	for _, cmd := range resp.Commands {
		if code := c.do("POST", "/v1/commands/"+cmd.ID+"/ack", env.Token, protocol.Ack{Status: protocol.Applied}, nil); code != 204 {
			t.Fatalf("ack %s: %d", cmd.ID, code)
		}
	}
}

func proxyIn(ns, name string) json.RawMessage {
	return json.RawMessage(`{"apiVersion":"nexo.io/v1alpha1","kind":"NexoProxy","metadata":{"name":"` + name + `","namespace":"` + ns + `"},"spec":{}}`)
}

var deployManifest = json.RawMessage(`{"apiVersion":"nexo.io/v1alpha1","kind":"NexoRateLimit","metadata":{"name":"rl","namespace":"web"},"spec":{"operationsPerSecond":5}}`)

// Every role × every action, through the real server and its SQLite file: 403 exactly where
// the capability table says no, and the refusal names the action and the roles that may.
func TestCapabilityMatrixThroughTheAPI(t *testing.T) {
	tn := newTenancy(t)
	tn.heartbeat(t, &protocol.Limits{Namespaces: []string{"web"}, ImageRepositories: []string{"registry.example.com/nexo/proxy"}})
	n := 0
	unique := func() string { n++; return fmt.Sprintf("x%d", n) }
	requests := map[authz.Action]func(token string) (int, string){}
	call := func(method, path string, body any) func(string) (int, string) {
		return func(token string) (int, string) {
			var e protocol.Error
			code := tn.do(method, path, token, body, &e)
			return code, e.Error
		}
	}
	requests[authz.ManagePrincipals] = func(tok string) (int, string) {
		return call("POST", acme+"/principals", map[string]string{"name": unique()})(tok)
	}
	requests[authz.ManageEnvironments] = func(tok string) (int, string) {
		return call("POST", acme+"/environments", map[string]string{"name": unique()})(tok)
	}
	requests[authz.SetEnvironmentLabels] = call("PUT", acme+"/environments/"+tn.env.ID+"/labels", map[string]any{"labels": map[string]string{"env": "production", "team": "payments", "region": "eu-west"}})
	requests[authz.ManageNamespaceTarget] = call("PUT", acme+"/environments/"+tn.env.ID+"/namespace-targets/web", map[string]any{"labels": map[string]string{"tier": "web"}})
	requests[authz.ManageProjects] = func(tok string) (int, string) {
		return call("POST", acme+"/projects", map[string]string{"name": unique()})(tok)
	}
	requests[authz.SetStage] = call("PUT", acme+"/projects/shop/stages/prod", controlplane.StageSpec{Environments: map[string]string{"env": "production", "team": "payments"}, Namespaces: map[string]string{"tier": "web"}})
	requests[authz.Deploy] = call("POST", acme+"/projects/shop/stages/prod/deploy", controlplane.StageDeploy{Environment: tn.env.ID, Namespace: "web", Manifests: []json.RawMessage{deployManifest}})
	requests[authz.Rollout] = call("POST", acme+"/projects/shop/stages/prod/rollout", controlplane.StageRollout{Environment: tn.env.ID, Image: "registry.example.com/nexo/proxy:0.3.1"})
	requests[authz.Uninstall] = call("POST", acme+"/projects/shop/stages/prod/uninstall", controlplane.StageUninstall{Environment: tn.env.ID, Namespace: "web", Name: "not-deployed"})
	requests[authz.ReadTargets] = call("GET", acme+"/projects/shop/stages/prod/targets", nil)
	requests[authz.ReadAudit] = call("GET", acme+"/audit", nil)
	requests[authz.ShareNamespaceTargets] = call("PUT", acme+"/projects/shop/stages/shared", controlplane.StageSpec{Environments: map[string]string{"env": "production"}, Namespaces: map[string]string{"tier": "web"}, SharedTargets: true})
	requests[authz.ReadEntitlement] = call("GET", acme+"/entitlement", nil)
	requests[authz.CreateRevision] = call("POST", acme+"/projects/shop/revisions", controlplane.NewRevision{Message: "rate limit", Manifests: []json.RawMessage{deployManifest}})
	requests[authz.ReadChanges] = call("GET", acme+"/projects/shop/revisions", nil)
	requests[authz.Preview] = call("POST", acme+"/projects/shop/stages/prod/preview", controlplane.StagePreview{Environment: tn.env.ID, Revision: 1})
	requests[authz.Promote] = call("POST", acme+"/projects/shop/stages/prod/promote", controlplane.StagePromote{Revision: 1})
	requests[authz.ApprovePromotion] = call("POST", acme+"/projects/shop/promotions/prm-none/approve", nil)
	requests[authz.Rollback] = call("POST", acme+"/projects/shop/stages/prod/rollback", controlplane.StageRollback{Environment: tn.env.ID, To: 999})
	requests[authz.OverrideCompatibility] = call("POST", acme+"/projects/shop/stages/prod/deploy", controlplane.StageDeploy{Environment: tn.env.ID, Revision: 1, OverrideCompatibility: true})
	requests[authz.FreezeEnvironment] = call("PUT", acme+"/environments/"+tn.env.ID+"/freeze", controlplane.FreezeRequest{Reason: "quarter-end close"})
	requests[authz.FreezeStage] = call("PUT", acme+"/projects/shop/stages/prod/freeze", controlplane.FreezeRequest{Reason: "incident 42"})
	requests[authz.ReadHealth] = call("GET", acme+"/environments/"+tn.env.ID+"/health", nil)
	// Sharing a stage's targets is asked for by setting a stage: a role that may not set one is
	// refused that first.
	refusedAs := map[authz.Action]authz.Action{authz.ShareNamespaceTargets: authz.SetStage, authz.OverrideCompatibility: authz.Deploy}
	if len(requests) != len(authz.Actions) {
		t.Fatalf("%d requests for %d actions", len(requests), len(authz.Actions))
	}
	// A proxy of project shop is deployed in web, so a rollout has something to re-sign. The
	// uninstall request names a proxy that is not deployed: allowed roles get past
	// authorization to the 404 (hostile_test.go, TestProjectScope, uninstalls for real).
	tn.deployApplied(t, "orders")
	// Requests that get past authorization to a refusal of their own: the uninstall, rollback
	// and approval name nothing that exists (404), and stage prod promotes from no stage (409).
	succeeded := func(action authz.Action, code int) bool {
		switch action {
		case authz.Uninstall, authz.Rollback, authz.ApprovePromotion:
			return code == 404
		case authz.Promote:
			return code == 409
		}
		return code >= 200 && code <= 299
	}
	for _, action := range authz.Actions {
		for _, role := range targeting.Roles {
			code, msg := requests[action](tn.tokens[role])
			switch {
			case authz.Can(role, action) && !succeeded(action, code):
				t.Errorf("%s may %s, got %d %s", role, action, code, msg)
			case !authz.Can(role, action) && (code != 403 || !(strings.Contains(msg, string(action)) || refusedAs[action] != "" && !authz.Can(role, refusedAs[action]) && strings.Contains(msg, string(refusedAs[action]))) || !strings.Contains(msg, "it takes one of")):
				t.Errorf("%s may not %s, got %d %q", role, action, code, msg)
			}
		}
		// The admin token may everything; no token, nothing.
		if code, msg := requests[action](admin); !succeeded(action, code) {
			t.Errorf("admin %s: %d %s", action, code, msg)
		}
		if code, _ := requests[action]("nexo-principal-guess"); code != 401 {
			t.Errorf("an unknown token %s: %d", action, code)
		}
	}
	// A principal of another tenant may nothing in acme.
	var other controlplane.NewPrincipal
	tn.do("POST", "/admin/tenants/globex/principals", admin, map[string]string{"name": "mallory"}, &other)
	tn.do("POST", "/admin/tenants/globex/role-bindings", admin, map[string]string{"principal": "mallory", "role": "tenant-admin"}, nil)
	for _, action := range authz.Actions {
		if code, _ := requests[action](other.Token); code != 403 {
			t.Errorf("globex's tenant admin %s in acme: %d", action, code)
		}
	}
}

// The source document's label example through a stage, and what a visible target is not: the
// targets query says eligible and deployable separately, with reasons; a deploy where the
// cluster has reported nothing, or outside what it allows, is refused (409) and nothing is
// queued; inside, it is queued, signed, and audited with the role it acted under.
func TestStageTargetsAndDeploy(t *testing.T) {
	tn := newTenancy(t)
	editor := tn.tokens[targeting.Editor]
	targets := func() map[string]targeting.Target {
		var out struct{ Targets []targeting.Target }
		if code := tn.do("GET", acme+"/projects/shop/stages/prod/targets", tn.tokens[targeting.Viewer], nil, &out); code != 200 {
			t.Fatalf("targets: %d", code)
		}
		m := map[string]targeting.Target{}
		for _, x := range out.Targets {
			m[x.Namespace] = x
		}
		return m
	}
	deploy := func(ns string) (int, string) {
		var e protocol.Error
		code := tn.do("POST", acme+"/projects/shop/stages/prod/deploy", editor, controlplane.StageDeploy{Environment: tn.env.ID, Namespace: ns, Manifests: []json.RawMessage{deployManifest}}, &e)
		return code, e.Error
	}
	// Not reported yet: eligible, not deployable.
	if tg := targets(); !tg["web"].Eligible || tg["web"].Deployable || tg["db"].Eligible || !strings.Contains(tg["db"].Reasons[0], "lack tier=web") {
		t.Errorf("before a report: %+v", tg)
	}
	if code, msg := deploy("web"); code != 409 || !strings.Contains(msg, "has not reported") {
		t.Errorf("deploy before a report: %d %s", code, msg)
	}
	// The cluster allows db only: web is eligible but refused by the cluster.
	tn.heartbeat(t, &protocol.Limits{Namespaces: []string{"db"}})
	if tg := targets(); !tg["web"].Eligible || tg["web"].Deployable || !strings.Contains(strings.Join(tg["web"].Reasons, ";"), "refused by the cluster") {
		t.Errorf("web outside the cluster's limit: %+v", tg["web"])
	}
	if code, msg := deploy("web"); code != 409 || !strings.Contains(msg, "refused by the cluster") {
		t.Errorf("deploy outside the cluster's limit: %d %s", code, msg)
	}
	if code, msg := deploy("db"); code != 409 || !strings.Contains(msg, "lack tier=web") {
		t.Errorf("deploy to a namespace target the stage does not select: %d %s", code, msg)
	}
	if code, msg := deploy("kube-system"); code != 409 || !strings.Contains(msg, "no namespace target kube-system") {
		t.Errorf("deploy to kube-system: %d %s", code, msg)
	}
	var v controlplane.EnvironmentView
	tn.do("GET", "/admin/environments/"+tn.env.ID, admin, nil, &v)
	if len(v.Commands) != 0 {
		t.Fatalf("refused deploys queued %d commands", len(v.Commands))
	}
	// Allowed: queued.
	tn.heartbeat(t, &protocol.Limits{Namespaces: []string{"web"}, ImageRepositories: []string{"registry.example.com/nexo/proxy"}})
	if code, msg := deploy("web"); code != 201 {
		t.Fatalf("deploy: %d %s", code, msg)
	}
	// A rollout to an image repository the cluster does not allow.
	var e protocol.Error
	if code := tn.do("POST", acme+"/projects/shop/stages/prod/rollout", editor, controlplane.StageRollout{Environment: tn.env.ID, Image: "evil.example.com/miner:1"}, &e); code != 409 || !strings.Contains(e.Error, "refused by the cluster") {
		t.Errorf("rollout to a disallowed repository: %d %s", code, e.Error)
	}
	var page controlplane.AuditPage
	tn.do("GET", acme+"/audit?action=deploy", tn.tokens[targeting.TenantAdmin], nil, &page)
	var got []string
	for _, r := range page.Records {
		got = append(got, r.Decision+" "+r.Role+" "+r.Target)
	}
	if len(got) != 5 || got[4] != "allowed editor "+tn.env.ID+"/web" || page.Records[4].CommandID == "" || page.Records[1].Decision != storage.Refused {
		t.Errorf("deploy audit: %v", got)
	}
}

// Bad input: each a clear refusal, nothing written.
func TestTenancyRefusals(t *testing.T) {
	tn := newTenancy(t)
	alice := tn.tokens[targeting.TenantAdmin]
	for _, tc := range []struct {
		name, method, path string
		body               any
		code               int
		want               string
	}{
		{"unknown principal", "POST", acme + "/role-bindings", map[string]string{"principal": "nobody", "role": "editor", "project": "shop"}, 404, "no principal nobody"},
		{"unknown role", "POST", acme + "/role-bindings", map[string]string{"principal": "carol", "role": "owner", "project": "shop"}, 400, `unknown role "owner"`},
		{"tenant admin in a project", "POST", acme + "/role-bindings", map[string]string{"principal": "carol", "role": "tenant-admin", "project": "shop"}, 400, "tenant-wide"},
		{"selector with an expression", "PUT", acme + "/projects/shop/stages/canary", controlplane.StageSpec{Environments: map[string]string{"env in (prod,staging)": "x"}, Namespaces: map[string]string{"tier": "web"}}, 400, "not expressions"},
		{"empty selector", "PUT", acme + "/projects/shop/stages/canary", controlplane.StageSpec{Environments: map[string]string{}, Namespaces: map[string]string{"tier": "web"}}, 400, "matches nothing"},
		{"stage of an unknown project", "PUT", acme + "/projects/nope/stages/prod", controlplane.StageSpec{Environments: map[string]string{"a": "b"}, Namespaces: map[string]string{"a": "b"}}, 404, "no project nope"},
		{"another tenant's environment", "PUT", "/admin/tenants/globex/environments/" + "ENV" + "/namespace-targets/web", map[string]any{"labels": map[string]string{"tier": "web"}}, 404, "no environment"},
		{"labels by a non-admin", "PUT", acme + "/environments/ENV/labels", map[string]any{"labels": map[string]string{"env": "production"}}, 403, "environment.set-labels"},
		{"unknown tenant", "POST", "/admin/tenants/nope/projects", map[string]string{"name": "x"}, 404, "no tenant nope"},
	} {
		tok := alice
		if strings.Contains(tc.name, "non-admin") {
			tok = tn.tokens[targeting.ProjectManager]
		}
		if strings.Contains(tc.name, "another tenant") || strings.Contains(tc.name, "unknown tenant") {
			tok = admin
		}
		var e protocol.Error
		if code := tn.do(tc.method, strings.ReplaceAll(tc.path, "ENV", tn.env.ID), tok, tc.body, &e); code != tc.code || !strings.Contains(e.Error, tc.want) {
			t.Errorf("%s: %d %q, want %d %q", tc.name, code, e.Error, tc.code, tc.want)
		}
	}
	// Nothing half-written: the stage canary does not exist, the labels are as they were.
	var e protocol.Error
	if code := tn.do("GET", acme+"/projects/shop/stages/canary/targets", alice, nil, &e); code != 404 {
		t.Errorf("the refused stage exists: %d", code)
	}
	var out struct{ Targets []targeting.Target }
	tn.do("GET", acme+"/projects/shop/stages/prod/targets", alice, nil, &out)
	if len(out.Targets) != 2 || !out.Targets[1].Eligible {
		t.Errorf("after the refusals: %+v", out.Targets)
	}
}

// The license entitlement is the last check of a deploy through a stage: none, expired, or one
// that the proxies the tenant's environments report plus this deploy's new ones would exceed is
// refused with 403 and the reason, and nothing is queued; a proxy deployed again does not count
// twice. Only the platform admin sets it; the tenant's roles read it.
func TestLicenseEntitlement(t *testing.T) {
	tn := newTenancy(t)
	editor := tn.tokens[targeting.Editor]
	proxy := func(name string) json.RawMessage {
		return json.RawMessage(`{"apiVersion":"nexo.io/v1alpha1","kind":"NexoProxy","metadata":{"name":"` + name + `","namespace":"web"},"spec":{}}`)
	}
	deploy := func(names ...string) (int, string) {
		var ms []json.RawMessage
		for _, n := range names {
			ms = append(ms, proxy(n))
		}
		var e protocol.Error
		code := tn.do("POST", acme+"/projects/shop/stages/prod/deploy", editor, controlplane.StageDeploy{Environment: tn.env.ID, Namespace: "web", Manifests: ms}, &e)
		return code, e.Error
	}
	entitle := func(token string, max int, expires time.Time) int {
		return tn.do("PUT", acme+"/entitlement", token, targeting.Entitlement{MaxProxies: max, ExpiresAt: expires}, nil)
	}
	// The cluster reports two proxies in web: orders and billing.
	hb := heartbeat("cluster-eu")
	hb.Limits = &protocol.Limits{Namespaces: []string{"web"}, ImageRepositories: []string{"*"}}
	hb.Deployments = []protocol.Deployment{{Namespace: "web", Name: "orders", Replicas: 1}, {Namespace: "web", Name: "billing", Replicas: 1}}
	if code := tn.do("POST", "/v1/heartbeat", tn.env.Token, hb, nil); code != 200 {
		t.Fatalf("heartbeat: %d", code)
	}
	if code := entitle(tn.tokens[targeting.TenantAdmin], 100, time.Now().Add(time.Hour)); code != 403 {
		t.Errorf("a tenant admin raising its own entitlement: %d, want 403 (the admin token only)", code)
	}
	if code := entitle(admin, 3, time.Now().Add(time.Hour)); code != 200 {
		t.Fatalf("entitlement: %d", code)
	}
	var got targeting.Entitlement
	if code := tn.do("GET", acme+"/entitlement", tn.tokens[targeting.TenantAdmin], nil, &got); code != 200 || got.MaxProxies != 3 {
		t.Errorf("the tenant admin reading the entitlement: %d %+v", code, got)
	}
	if code := tn.do("GET", acme+"/entitlement", tn.tokens[targeting.Viewer], nil, nil); code != 403 {
		t.Errorf("a project's viewer reading the tenant's entitlement: %d, want 403", code)
	}
	// 2 reported + 2 new > 3.
	if code, msg := deploy("search", "cart"); code != 403 || !strings.Contains(msg, "allows 3 proxies: 2 deployed and 2 new in this deploy would make 4") {
		t.Errorf("over the entitlement: %d %s", code, msg)
	}
	// Deploying orders again adds nothing: 2 + 1 (search) = 3.
	if code, msg := deploy("orders", "search"); code != 201 {
		t.Errorf("within the entitlement: %d %s", code, msg)
	}
	if code := entitle(admin, 3, time.Now().Add(-time.Minute)); code != 200 {
		t.Fatal("expired entitlement")
	}
	if code, msg := deploy("orders"); code != 403 || !strings.Contains(msg, "expired") {
		t.Errorf("an expired entitlement: %d %s", code, msg)
	}
	// Bad input changes nothing.
	if code := entitle(admin, -1, time.Now().Add(time.Hour)); code != 400 {
		t.Errorf("a negative maximum: %d", code)
	}
	if code := tn.do("PUT", "/admin/tenants/nobody/entitlement", admin, targeting.Entitlement{MaxProxies: 1, ExpiresAt: time.Now().Add(time.Hour)}, nil); code != 404 {
		t.Errorf("an unknown tenant: %d", code)
	}
	// Without one: refused, and the refusal is audited with its reason.
	if code := tn.do("GET", "/admin/tenants/globex/entitlement", admin, nil, nil); code != 404 {
		t.Errorf("globex's entitlement: %d, want 404 (none)", code)
	}
	var v controlplane.EnvironmentView
	tn.do("GET", "/admin/environments/"+tn.env.ID, admin, nil, &v)
	if len(v.Commands) != 1 {
		t.Errorf("%d commands queued, want the one deploy within the entitlement", len(v.Commands))
	}
	var page controlplane.AuditPage
	tn.do("GET", acme+"/audit?action=deploy&decision=refused", tn.tokens[targeting.TenantAdmin], nil, &page)
	if len(page.Records) != 2 || !strings.Contains(page.Records[0].Reason, "license entitlement") {
		t.Errorf("refused deploys in the audit: %+v", page.Records)
	}
}
