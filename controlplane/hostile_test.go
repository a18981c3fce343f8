package controlplane_test

// The Control Plane tried as a hostile tenant would (docs/controlplane.md): revocation, project
// scope, the entitlement as a limit, strict input, the audit history's anchor and transaction,
// storage errors, and signing keys at rest. Each through the real server and its SQLite file.

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nexo-io/nexo-edge/controlplane/storage"

	"github.com/nexo-io/nexo-edge/contract/protocol"
	"github.com/nexo-io/nexo-edge/contract/signature"
	"github.com/nexo-io/nexo-edge/controlplane"
	"github.com/nexo-io/nexo-edge/controlplane/targeting"
)

// raw sends body as is, with contentType (none when ""), and an Authorization header exactly
// as given; it returns the response and its body.
func (c *cp) raw(method, path, authorization, contentType string, body []byte) (*http.Response, []byte) {
	c.t.Helper()
	req, _ := http.NewRequest(method, c.srv.URL+path, bytes.NewReader(body))
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp, out
}

// sqlite opens the server's database file beside it, as someone with the file would.
func (c *cp) sqlite(t *testing.T) *sql.DB {
	db, err := sql.Open("sqlite", "file:"+c.db+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func (c *cp) auditOf(token, tenant, query string) []storage.AuditRecord {
	c.t.Helper()
	var page controlplane.AuditPage
	path := "/admin/audit?" + query
	if tenant != "" {
		path = "/admin/tenants/" + tenant + "/audit?" + query
	}
	if code := c.do("GET", path+"&limit=1000", token, nil, &page); code != 200 {
		c.t.Fatalf("audit %s: %d", path, code)
	}
	return page.Records
}

// 1. Revocation: a principal's token is rotated, expires, loses a role and is deleted, each
// refused on its next request; a tenant admin rotates its environment's connect token with a
// grace; principals and bindings are listed for review, never a token.
func TestRevocation(t *testing.T) {
	tn := newTenancy(t)
	alice := tn.tokens[targeting.TenantAdmin]
	var eve controlplane.NewPrincipal
	if code := tn.do("POST", acme+"/principals", alice, map[string]any{"name": "eve", "expiresInSeconds": 3600}, &eve); code != 201 {
		t.Fatalf("create eve: %d", code)
	}
	if code := tn.do("POST", acme+"/role-bindings", alice, map[string]string{"principal": "eve", "role": "editor", "project": "shop"}, nil); code != 200 {
		t.Fatalf("bind eve: %d", code)
	}
	targets := func(token string) (int, string) {
		var e protocol.Error
		code := tn.do("GET", acme+"/projects/shop/stages/prod/targets", token, nil, &e)
		return code, e.Error
	}
	if code, _ := targets(eve.Token); code != 200 {
		t.Fatalf("eve's token: %d", code)
	}
	// Expiry: an hour and a minute later the token is refused, naming the expiry.
	tn.skew.Store(int64(61 * time.Minute))
	if code, msg := targets(eve.Token); code != 401 || !strings.Contains(msg, "expired") {
		t.Errorf("an expired token: %d %s", code, msg)
	}
	tn.skew.Store(0)
	// Rotation: the leaked token dies at once; the new one works.
	var rotated controlplane.NewPrincipal
	if code := tn.do("POST", acme+"/principals/eve/token", alice, controlplane.TokenLifetime{}, &rotated); code != 200 || rotated.Token == "" || rotated.Token == eve.Token {
		t.Fatalf("rotate eve's token: %d", code)
	}
	if code, _ := targets(eve.Token); code != 401 {
		t.Errorf("the rotated-away token: %d, want 401", code)
	}
	if code, _ := targets(rotated.Token); code != 200 {
		t.Errorf("the new token: %d", code)
	}
	if got := rotated.TokenExpiresAt.Sub(time.Now()); got < 89*24*time.Hour || got > 91*24*time.Hour {
		t.Errorf("default lifetime %s, want 90 days", got)
	}
	if code := tn.do("POST", acme+"/principals/eve/token", alice, controlplane.TokenLifetime{ExpiresInSeconds: 400 * 24 * 3600}, nil); code != 400 {
		t.Errorf("a 400-day token: %d, want 400", code)
	}
	// Review: every principal with its bindings and expiry, and no token anywhere.
	resp, body := tn.raw("GET", acme+"/principals", "Bearer "+alice, "", nil)
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"name":"eve"`) || !strings.Contains(string(body), `"role":"editor","project":"shop"`) {
		t.Errorf("principals: %d %s", resp.StatusCode, body)
	}
	for _, tok := range []string{rotated.Token, alice, eve.Token, "token_hash", `"token"`} {
		if strings.Contains(string(body), tok) {
			t.Errorf("the principal listing holds %q", tok)
		}
	}
	if code := tn.do("GET", acme+"/principals", tn.tokens[targeting.ProjectManager], nil, nil); code != 403 {
		t.Errorf("a project manager listing principals: %d, want 403", code)
	}
	// Unbind: the role no longer applies from the next request.
	deploy := func(token string) int {
		return tn.do("POST", acme+"/projects/shop/stages/prod/deploy", token, controlplane.StageDeploy{Environment: tn.env.ID, Namespace: "web", Manifests: []json.RawMessage{deployManifest}}, nil)
	}
	tn.heartbeat(t, &protocol.Limits{Namespaces: []string{"web"}, ImageRepositories: []string{"*"}})
	if code := deploy(rotated.Token); code != 201 {
		t.Fatalf("eve deploys: %d", code)
	}
	if code := tn.do("DELETE", acme+"/principals/eve/role-bindings/editor?project=shop", alice, nil, nil); code != 204 {
		t.Fatalf("unbind: %d", code)
	}
	if code := deploy(rotated.Token); code != 403 {
		t.Errorf("eve deploys after unbind: %d, want 403", code)
	}
	if code := tn.do("DELETE", acme+"/principals/eve/role-bindings/editor?project=shop", alice, nil, nil); code != 404 {
		t.Errorf("unbinding again: %d, want 404", code)
	}
	// Delete: the principal's token is refused.
	if code := tn.do("DELETE", acme+"/principals/eve", alice, nil, nil); code != 204 {
		t.Fatalf("delete eve: %d", code)
	}
	if code, _ := targets(rotated.Token); code != 401 {
		t.Errorf("a deleted principal's token: %d, want 401", code)
	}
	if code := tn.do("DELETE", "/admin/tenants/globex/principals/eve", alice, nil, nil); code != 403 {
		t.Errorf("acme's admin deleting in globex: %d, want 403", code)
	}
	// The tenant admin rotates its environment's connect token; the old one works through the
	// grace, and an editor may not rotate.
	if code := tn.do("POST", acme+"/environments/"+tn.env.ID+"/token", tn.tokens[targeting.Editor], map[string]int{"graceSeconds": 60}, nil); code != 403 {
		t.Errorf("an editor rotating the connect token: %d, want 403", code)
	}
	var rt controlplane.RotatedToken
	if code := tn.do("POST", acme+"/environments/"+tn.env.ID+"/token", alice, map[string]int{"graceSeconds": 60}, &rt); code != 200 || rt.Token == "" {
		t.Fatalf("the tenant admin rotating the connect token: %d", code)
	}
	if code := tn.do("POST", "/v1/heartbeat", tn.env.Token, heartbeat("cluster-eu"), nil); code != 200 {
		t.Errorf("the old connect token within its grace: %d", code)
	}
	if code := tn.do("POST", "/v1/heartbeat", rt.Token, heartbeat("cluster-eu"), nil); code != 200 {
		t.Errorf("the new connect token: %d", code)
	}
	if code := tn.do("POST", "/v1/heartbeat", tn.env.Token, heartbeat("cluster-eu"), nil); code != 401 {
		t.Errorf("the old connect token once the new one was used: %d, want 401", code)
	}
	// Every revocation is in the tenant's history, with no token.
	records := tn.auditOf(alice, "acme", "action=principal.manage")
	raw, _ := json.Marshal(records)
	for _, want := range []string{"principal acme/eve"} {
		if !strings.Contains(string(raw), want) {
			t.Errorf("the revocations' records lack %q", want)
		}
	}
	for _, tok := range []string{eve.Token, rotated.Token, rt.Token} {
		if strings.Contains(string(raw), tok) {
			t.Error("the audit history holds a token")
		}
	}
}

// 2. Project scope: the deployed set records each object's project; a rollout through a stage
// re-signs its project's proxies in its targets only; a stage may not be re-pointed at another
// project's namespace targets unless a tenant admin allows sharing, and even then a project
// neither replaces nor uninstalls another's objects.
func TestProjectScope(t *testing.T) {
	tn := newTenancy(t)
	alice, bob := tn.tokens[targeting.TenantAdmin], tn.tokens[targeting.ProjectManager]
	// Project api owns namespace target db (tier=data) through its stage prod.
	must := func(code, want int, what string) {
		t.Helper()
		if code != want {
			t.Fatalf("%s: %d, want %d", what, code, want)
		}
	}
	must(tn.do("POST", acme+"/projects", alice, map[string]string{"name": "api"}, nil), 201, "project api")
	must(tn.do("PUT", acme+"/projects/api/stages/prod", alice, controlplane.StageSpec{Environments: map[string]string{"env": "production"}, Namespaces: map[string]string{"tier": "data"}}, nil), 200, "stage api/prod")
	tn.deployApplied(t, "orders", "billing")
	var e protocol.Error
	must(tn.do("POST", acme+"/projects/api/stages/prod/deploy", alice, controlplane.StageDeploy{Environment: tn.env.ID, Namespace: "db", Manifests: []json.RawMessage{proxyIn("db", "pay")}}, &e), 201, "deploy api's pay "+e.Error)
	tn.applyAll(t, tn.env)

	// A rollout through shop/prod re-signs shop's two proxies in web, not api's pay in db.
	var q map[string]string
	must(tn.do("POST", acme+"/projects/shop/stages/prod/rollout", bob, controlplane.StageRollout{Environment: tn.env.ID, Image: "registry.example.com/nexo/proxy:2"}, &q), 201, "rollout through shop/prod")
	hb := heartbeat("cluster-eu")
	hb.Limits = &protocol.Limits{Namespaces: []string{"*"}, ImageRepositories: []string{"*"}}
	var resp protocol.HeartbeatResponse
	tn.do("POST", "/v1/heartbeat", tn.env.Token, hb, &resp)
	if len(resp.Commands) != 1 || resp.Commands[0].ID != q["id"] {
		t.Fatalf("delivered %+v, want the rollout", resp.Commands)
	}
	var names []string
	for _, m := range resp.Commands[0].Manifests {
		var o struct {
			Metadata struct{ Namespace, Name string }
		}
		_ = json.Unmarshal(m, &o)
		names = append(names, o.Metadata.Namespace+"/"+o.Metadata.Name)
	}
	if strings.Join(names, ",") != "web/billing,web/orders" || strings.Join(resp.Commands[0].Namespaces, ",") != "web" {
		t.Errorf("shop's rollout carries %v in %v, want web/billing and web/orders only", names, resp.Commands[0].Namespaces)
	}

	// Re-pointing shop's stage at db (api's) is refused; sharing is a tenant admin's decision.
	onData := controlplane.StageSpec{Environments: map[string]string{"env": "production"}, Namespaces: map[string]string{"tier": "data"}}
	if code := tn.do("PUT", acme+"/projects/shop/stages/prod", bob, onData, &e); code != 409 || !strings.Contains(e.Error, "project api's stage prod reaches") {
		t.Errorf("re-pointing shop/prod at api's namespace target: %d %s", code, e.Error)
	}
	onData.SharedTargets = true
	if code := tn.do("PUT", acme+"/projects/shop/stages/prod", bob, onData, &e); code != 403 || !strings.Contains(e.Error, "only a tenant admin") {
		t.Errorf("a project manager sharing targets: %d %s", code, e.Error)
	}
	// Still shop's own web stage: uninstalling api's pay is not deployable for it.
	if code := tn.do("POST", acme+"/projects/shop/stages/prod/uninstall", bob, controlplane.StageUninstall{Environment: tn.env.ID, Namespace: "db", Name: "pay"}, &e); code != 409 {
		t.Errorf("shop uninstalling in db: %d %s", code, e.Error)
	}
	// The tenant admin lets shop share db: shop still may neither replace nor uninstall pay.
	must(tn.do("PUT", acme+"/projects/shop/stages/shared", alice, onData, &e), 200, "a shared stage by the tenant admin "+e.Error)
	if code := tn.do("POST", acme+"/projects/shop/stages/shared/uninstall", bob, controlplane.StageUninstall{Environment: tn.env.ID, Namespace: "db", Name: "pay"}, &e); code != 409 || !strings.Contains(e.Error, "belongs to project api") {
		t.Errorf("shop uninstalling api's pay through a shared stage: %d %s", code, e.Error)
	}
	if code := tn.do("POST", acme+"/projects/shop/stages/shared/deploy", bob, controlplane.StageDeploy{Environment: tn.env.ID, Namespace: "db", Manifests: []json.RawMessage{proxyIn("db", "pay")}}, &e); code != 409 || !strings.Contains(e.Error, "belongs to project api") {
		t.Errorf("shop replacing api's pay through a shared stage: %d %s", code, e.Error)
	}
	if code := tn.do("POST", acme+"/projects/shop/stages/shared/rollout", bob, controlplane.StageRollout{Environment: tn.env.ID, Image: "registry.example.com/nexo/proxy:3"}, &e); code != 409 || !strings.Contains(e.Error, "no NexoProxy deployed") {
		t.Errorf("shop's rollout through the shared stage (db holds only api's pay): %d %s", code, e.Error)
	}
	// api uninstalls its own pay.
	must(tn.do("POST", acme+"/projects/api/stages/prod/uninstall", alice, controlplane.StageUninstall{Environment: tn.env.ID, Namespace: "db", Name: "pay"}, &e), 201, "api uninstalls pay "+e.Error)
	// The refusals are audited.
	refused := tn.auditOf(alice, "acme", "decision=refused")
	var reasons []string
	for _, r := range refused {
		reasons = append(reasons, r.Action+": "+r.Reason)
	}
	all := strings.Join(reasons, "\n")
	for _, want := range []string{"stage.set: stage shop/prod would reach", "uninstall: NexoProxy db/pay", "deploy: NexoProxy db/pay"} {
		if !strings.Contains(all, want) {
			t.Errorf("refusals audited:\n%s\nlack %q", all, want)
		}
	}
}

// entitledTenancy is a tenancy whose cluster allows web and whose entitlement is 3 proxies.
func entitledTenancy(t *testing.T) *tenancy {
	tn := newTenancy(t)
	tn.heartbeat(t, &protocol.Limits{Namespaces: []string{"web"}, ImageRepositories: []string{"*"}})
	if code := tn.do("PUT", acme+"/entitlement", admin, targeting.Entitlement{MaxProxies: 3, ExpiresAt: time.Now().Add(time.Hour)}, nil); code != 200 {
		t.Fatalf("entitlement: %d", code)
	}
	return tn
}

func (tn *tenancy) deployProxy(name string) int {
	return tn.do("POST", acme+"/projects/shop/stages/prod/deploy", tn.tokens[targeting.Editor],
		controlplane.StageDeploy{Environment: tn.env.ID, Namespace: "web", Manifests: []json.RawMessage{proxyIn("web", name)}}, nil)
}

// 3. The entitlement is a limit: queued proxies count before the Manager reports them, and
// check and enqueue are one transaction, so 20 concurrent deploys take exactly the 3 allowed;
// a manifest whose keys are spelled otherwise is refused, not left uncounted.
func TestEntitlementIsALimit(t *testing.T) {
	tn := entitledTenancy(t)
	accepted := 0
	for i := range 6 {
		if tn.deployProxy(fmt.Sprintf("seq%d", i)) == 201 {
			accepted++
		}
	}
	if accepted != 3 {
		t.Errorf("%d of 6 sequential deploys accepted, want 3", accepted)
	}
	// Once applied and reported they still count (once each), and again once acknowledged.
	tn.applyAll(t, tn.env)
	if code := tn.deployProxy("seq9"); code != 403 {
		t.Errorf("a fourth proxy after the three were applied: %d", code)
	}
	if code := tn.deployProxy("seq0"); code != 201 {
		t.Errorf("deploying an entitled proxy again: %d", code)
	}

	tn = entitledTenancy(t)
	var wg sync.WaitGroup
	codes := make([]int, 20)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i] = tn.deployProxy(fmt.Sprintf("c%02d", i))
		}()
	}
	wg.Wait()
	count := map[int]int{}
	for _, c := range codes {
		count[c]++
	}
	if count[201] != 3 || count[403] != 17 {
		t.Errorf("20 concurrent deploys: %v, want 3 accepted and 17 refused", count)
	}
	// A manifest spelled "KIND"/"Name" is refused: what is counted is what is signed.
	tn = entitledTenancy(t)
	for _, m := range []string{
		`{"apiVersion":"nexo.io/v1alpha1","KIND":"NexoProxy","metadata":{"name":"x","namespace":"web"}}`,
		`{"apiVersion":"nexo.io/v1alpha1","kind":"NexoProxy","metadata":{"Name":"x","namespace":"web"}}`,
	} {
		var e protocol.Error
		code := tn.do("POST", acme+"/projects/shop/stages/prod/deploy", tn.tokens[targeting.Editor], controlplane.StageDeploy{Environment: tn.env.ID, Namespace: "web", Manifests: []json.RawMessage{json.RawMessage(m)}}, &e)
		if code != 400 || !strings.Contains(e.Error, "spelled exactly") {
			t.Errorf("%s: %d %s", m, code, e.Error)
		}
	}
	var v controlplane.EnvironmentView
	tn.do("GET", "/admin/environments/"+tn.env.ID, admin, nil, &v)
	if len(v.Commands) != 0 {
		t.Errorf("%d commands queued from misspelled manifests", len(v.Commands))
	}
}

// 4. Strict input: unknown fields, trailing data, a wrong Content-Type, a token without
// "Bearer", unbounded or unprintable names; exactly one error body; unauthenticated requests
// never write into a tenant's history, and are recorded at most 10 a minute.
func TestStrictInput(t *testing.T) {
	tn := newTenancy(t)
	alice := "Bearer " + tn.tokens[targeting.TenantAdmin]
	for _, tc := range []struct {
		name, method, path, auth, ctype, body string
		code                                  int
		want                                  string
	}{
		{"unknown field", "POST", acme + "/role-bindings", alice, "application/json", `{"principal":"dave","role":"viewer","projekt":"web"}`, 400, `unknown field "projekt"`},
		{"trailing data", "POST", acme + "/projects", alice, "application/json", `{"name":"a"}{"name":"b"}`, 400, "more than one JSON value"},
		{"wrong content type", "POST", acme + "/projects", alice, "text/plain", `{"name":"c"}`, 415, "Content-Type: application/json"},
		{"no content type", "POST", acme + "/projects", alice, "", `{"name":"d"}`, 415, "Content-Type"},
		{"bare token", "POST", acme + "/projects", tn.tokens[targeting.TenantAdmin], "application/json", `{"name":"e"}`, 401, "Bearer"},
		{"10,000-character name", "POST", acme + "/environments", alice, "application/json", `{"name":"` + strings.Repeat("x", 10000) + `"}`, 400, "longer than 100"},
		{"newline in a name", "POST", "/admin/environments", "Bearer " + admin, "application/json", `{"name":"eu\nFAKE 0 healthy"}`, 400, "control"},
		{"terminal escape in a name", "POST", "/admin/environments", "Bearer " + admin, "application/json", `{"name":"\u001b[31mred"}`, 400, "control"},
		{"path text", "GET", "/admin/tenants/acme/projects/shop/stages/%0Aevil/targets", alice, "", ``, 400, "not a name"},
	} {
		resp, body := tn.raw(tc.method, tc.path, tc.auth, tc.ctype, []byte(tc.body))
		dec := json.NewDecoder(bytes.NewReader(body))
		var e protocol.Error
		if resp.StatusCode != tc.code || dec.Decode(&e) != nil || !strings.Contains(e.Error, tc.want) || dec.More() {
			t.Errorf("%s: %d %s, want %d with one body naming %q", tc.name, resp.StatusCode, body, tc.code, tc.want)
		}
	}
	// Nothing of the refused requests was made.
	var ps struct{ Principals []storage.Principal }
	tn.do("GET", acme+"/principals", tn.tokens[targeting.TenantAdmin], nil, &ps)
	for _, p := range ps.Principals {
		if p.Name == "dave" && len(p.Bindings) != 1 {
			t.Errorf("dave's bindings after the refused one: %+v", p.Bindings)
		}
	}
	// 50 unauthenticated requests naming acme and a tenant that does not exist: none in acme's
	// history, none naming ghost, 10 recorded; the next minute's record counts the 40 left out.
	before := len(tn.auditOf(admin, "", "actor=unknown"))
	tn.skew.Store(int64(61 * time.Second)) // a minute of its own
	for i := range 50 {
		method, path := "POST", acme+"/projects"
		if i%2 == 1 {
			method, path = "PUT", "/admin/tenants/ghost-tenant/environments/FAKE-TARGET/labels"
		}
		tn.raw(method, path, "Bearer nope", "application/json", []byte(`{"name":"x"}`))
	}
	unknown := tn.auditOf(admin, "", "actor=unknown")
	if len(unknown)-before != 10 {
		t.Errorf("%d unauthenticated refusals recorded in a minute, want 10", len(unknown)-before)
	}
	raw, _ := json.Marshal(unknown)
	if strings.Contains(string(raw), "ghost") || strings.Contains(string(raw), "FAKE-TARGET") || strings.Contains(string(raw), `"tenant":"acme"`) {
		t.Errorf("unauthenticated path text in the audit: %s", raw)
	}
	for _, r := range tn.auditOf(tn.tokens[targeting.TenantAdmin], "acme", "") {
		if r.Actor == "unknown" {
			t.Errorf("an unauthenticated request in acme's history: %+v", r)
		}
	}
	tn.skew.Store(int64(122 * time.Second))
	tn.raw("POST", acme+"/projects", "Bearer nope", "application/json", []byte(`{"name":"x"}`))
	unknown = tn.auditOf(admin, "", "actor=unknown")
	if last := unknown[len(unknown)-1]; !strings.Contains(last.Reason, "40 more requests without a valid token") {
		t.Errorf("the next minute's record: %+v", last)
	}
}

// 5. The audit history: a principal's refused admin action is recorded as the principal (403);
// the record is in the action's transaction (an audit that cannot be written undoes the
// action); a tenant sees the Manager's deliveries and acknowledgements of its commands; a
// history cut off at its end is found by its checkpoint, on verify and on start.
func TestAuditAnchoredAndTransactional(t *testing.T) {
	tn := newTenancy(t)
	alice := tn.tokens[targeting.TenantAdmin]
	var e protocol.Error
	if code := tn.do("POST", "/admin/tenants", alice, map[string]string{"name": "mine"}, &e); code != 403 {
		t.Errorf("a tenant admin creating a tenant: %d %s", code, e.Error)
	}
	recs := tn.auditOf(admin, "", "action=tenant.create&decision=refused")
	if len(recs) != 1 || recs[0].Actor != "principal:acme/alice" || recs[0].Tenant != "acme" {
		t.Errorf("the refused admin action's record: %+v", recs)
	}
	// The Manager's records of acme's commands are in acme's history.
	tn.deployApplied(t, "orders")
	var kinds []string
	for _, r := range tn.auditOf(alice, "acme", "") {
		if strings.HasPrefix(r.Actor, "manager:") {
			kinds = append(kinds, r.Action)
		}
	}
	if strings.Join(kinds, ",") != "command.deliver,command.ack" {
		t.Errorf("the Manager's records in acme's history: %v", kinds)
	}
	// An audit record that cannot be written: the action is rolled back, answered 500 with a
	// request id, and the log names it.
	db := tn.sqlite(t)
	if _, err := db.Exec(`CREATE TRIGGER audit_fails BEFORE INSERT ON audit WHEN NEW.action = 'project.manage' BEGIN SELECT RAISE(ABORT, 'disk full'); END`); err != nil {
		t.Fatal(err)
	}
	resp, body := tn.raw("POST", acme+"/projects", "Bearer "+alice, "application/json", []byte(`{"name":"unaudited"}`))
	id := resp.Header.Get(controlplane.RequestIDHeader)
	if resp.StatusCode != 500 || id == "" || !strings.Contains(string(body), id) || strings.Contains(string(body), "disk full") {
		t.Errorf("an action whose audit fails: %d %s (request id %q)", resp.StatusCode, body, id)
	}
	if !strings.Contains(tn.logs.String(), "requestId="+id) || !strings.Contains(tn.logs.String(), "disk full") {
		t.Errorf("the log does not name request %s and its cause:\n%s", id, tn.logs.String())
	}
	if code := tn.do("PUT", acme+"/projects/unaudited/stages/x", alice, controlplane.StageSpec{Environments: map[string]string{"a": "b"}, Namespaces: map[string]string{"a": "b"}}, nil); code != 404 {
		t.Errorf("the unaudited project exists: %d", code)
	}
	if _, err := db.Exec(`DROP TRIGGER audit_fails`); err != nil {
		t.Fatal(err)
	}

	// The checkpoint: a server anchored to a file outside the database.
	dir := t.TempDir()
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	dbPath := filepath.Join(dir, "cp.db")
	ckpt := filepath.Join(t.TempDir(), "elsewhere", "audit-checkpoint")
	_ = os.MkdirAll(filepath.Dir(ckpt), 0o755)
	serve := func() (*controlplane.Server, *storage.Store, error) {
		store, err := storage.Open(dbPath)
		if err != nil {
			t.Fatal(err)
		}
		s, err := controlplane.New(context.Background(), controlplane.Config{Store: store, Key: key, AdminToken: admin, KeyEncryption: testKEK(key), Checkpoint: &controlplane.Checkpoint{Path: ckpt, Key: key}})
		return s, store, err
	}
	s, store, err := serve()
	if err != nil {
		t.Fatal(err)
	}
	h := s.Handler()
	call := func(method, path string, body string) *http.Response {
		req, _ := http.NewRequest(method, "http://cp"+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+admin)
		req.Header.Set("Content-Type", "application/json")
		rec := &responseRecorder{header: http.Header{}}
		h.ServeHTTP(rec, req)
		return &http.Response{StatusCode: rec.code, Body: io.NopCloser(&rec.body)}
	}
	for i := range 5 {
		if r := call("POST", "/admin/tenants", fmt.Sprintf(`{"name":"t%d"}`, i)); r.StatusCode != 201 {
			t.Fatalf("tenant %d: %d", i, r.StatusCode)
		}
	}
	var v storage.AuditVerification
	_ = json.NewDecoder(call("GET", "/admin/audit/verify", "").Body).Decode(&v)
	if !v.OK || v.Anchor == nil || v.Anchor.Seq != 5 {
		t.Fatalf("anchored verify: %+v", v)
	}
	// Cut the last two records off, directly in SQLite.
	side, err := sql.Open("sqlite", "file:"+dbPath+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer side.Close()
	if _, err := side.Exec(`DROP TRIGGER audit_no_delete; DELETE FROM audit WHERE seq > 3`); err != nil {
		t.Fatal(err)
	}
	_ = json.NewDecoder(call("GET", "/admin/audit/verify", "").Body).Decode(&v)
	if v.OK || !strings.Contains(v.Reason, "removed from the end") {
		t.Errorf("verify of a truncated history: %+v", v)
	}
	_ = store.Close()
	if _, store, err = serve(); err == nil || !strings.Contains(err.Error(), "removed from the end") {
		t.Errorf("starting on a truncated history: %v", err)
	}
	_ = store.Close()
	// An edited checkpoint is not believed either.
	raw, _ := os.ReadFile(ckpt)
	_ = os.WriteFile(ckpt, bytes.Replace(raw, []byte(`"seq":5`), []byte(`"seq":3`), 1), 0o600)
	if _, store, err = serve(); err == nil || !strings.Contains(err.Error(), "not signed") {
		t.Errorf("starting with an edited checkpoint: %v", err)
	}
	_ = store.Close()
}

// responseRecorder is a minimal http.ResponseWriter.
type responseRecorder struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (r *responseRecorder) Header() http.Header { return r.header }
func (r *responseRecorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
}
func (r *responseRecorder) Write(b []byte) (int, error) {
	if r.code == 0 {
		r.code = 200
	}
	return r.body.Write(b)
}

// 6. Storage errors are 500s that name the request id, logged with it, never a zero value
// answered as if nothing were wrong.
func TestStorageErrorsAreAnsweredAndLogged(t *testing.T) {
	c, env := newEnv(t)
	db := c.sqlite(t)
	if _, err := db.Exec(`ALTER TABLE heartbeats RENAME TO heartbeats_gone`); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/admin/environments/" + env.ID, "/admin/environments"} {
		resp, body := c.raw("GET", path, "Bearer "+admin, "", nil)
		id := resp.Header.Get(controlplane.RequestIDHeader)
		if resp.StatusCode != 500 || !strings.Contains(string(body), id) || strings.Contains(string(body), "heartbeats") {
			t.Errorf("GET %s with its table gone: %d %s", path, resp.StatusCode, body)
		}
		if !strings.Contains(c.logs.String(), "requestId="+id) {
			t.Errorf("GET %s: the log lacks request %s", path, id)
		}
	}
	if _, err := db.Exec(`ALTER TABLE heartbeats_gone RENAME TO heartbeats`); err != nil {
		t.Fatal(err)
	}
	if code := c.do("GET", "/admin/environments/"+env.ID, admin, nil, nil); code != 200 {
		t.Errorf("after the table is back: %d", code)
	}
}

// 7. Signing keys at rest: the database file holds them sealed, never the private key; a key
// stored in plaintext by an earlier version is sealed on start; another key-encryption key
// opens nothing.
func TestSigningKeysSealedAtRest(t *testing.T) {
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	db := filepath.Join(t.TempDir(), "cp.db")
	// An earlier version's database: a signing key in plaintext.
	_, old, _ := ed25519.GenerateKey(rand.Reader)
	store, err := storage.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	oldPEM := string(signature.MarshalPrivateKey(old))
	if err := store.AddActiveKey(context.Background(), signature.KeyID(old.Public().(ed25519.PublicKey)), oldPEM); err != nil {
		t.Fatal(err)
	}
	s, err := controlplane.New(context.Background(), controlplane.Config{Store: store, Key: key, AdminToken: admin, KeyEncryption: testKEK(key)})
	if err != nil {
		t.Fatal(err)
	}
	h := s.Handler()
	rotate := func(h http.Handler) int {
		req, _ := http.NewRequest("POST", "http://cp/admin/signing-keys/rotate", nil)
		req.Header.Set("Authorization", "Bearer "+admin)
		rec := &responseRecorder{header: http.Header{}}
		h.ServeHTTP(rec, req)
		return rec.code
	}
	if code := rotate(h); code != 200 {
		t.Fatalf("rotate: %d", code)
	}
	_ = store.Close()
	file, _ := os.ReadFile(db)
	wal, _ := os.ReadFile(db + "-wal")
	for _, f := range [][]byte{file, wal} {
		if bytes.Contains(f, []byte("PRIVATE KEY")) || bytes.Contains(f, []byte(strings.Split(oldPEM, "\n")[1])) {
			t.Error("the database file holds a private key in plaintext")
		}
	}
	side, _ := sql.Open("sqlite", "file:"+db)
	defer side.Close()
	rows, err := side.Query(`SELECT private_pem FROM signing_keys`)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for rows.Next() {
		var v string
		_ = rows.Scan(&v)
		if !strings.HasPrefix(v, "aes256gcm:v1:") {
			t.Errorf("a signing key stored as %.20q", v)
		}
		n++
	}
	rows.Close()
	if n != 2 {
		t.Errorf("%d signing keys, want the earlier one and the rotated one", n)
	}
	// Another key-encryption key opens nothing: the rotation fails, and says nothing of the key.
	store, _ = storage.Open(db)
	defer store.Close()
	wrong, _ := controlplane.NewAESKeyEncrypter(controlplane.GenerateKeyEncryptionKey())
	// (A server with another key-encryption key never serves: New refuses, so no rotation can
	// be attempted with it.)
	if _, err := controlplane.New(context.Background(), controlplane.Config{Store: store, Key: key, AdminToken: admin, KeyEncryption: wrong}); err == nil || !strings.Contains(err.Error(), "does not open") {
		t.Errorf("another key-encryption key: %v", err)
	}
}

// A database made before principal tokens expired: Open adds the column, and its principals get
// the default lifetime from now, not an expiry already past.
func TestOpenMigratesPrincipalExpiry(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	old, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{
		`CREATE TABLE tenants (id TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE, created TEXT NOT NULL)`,
		`CREATE TABLE principals (id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL REFERENCES tenants(id), name TEXT NOT NULL,
		  token_hash TEXT NOT NULL UNIQUE, created TEXT NOT NULL, UNIQUE (tenant_id, name))`,
		`INSERT INTO tenants VALUES ('acme', 'acme', '2026-11-01T00:00:00Z')`,
		`INSERT INTO principals VALUES ('p-1', 'acme', 'alice', 'hash', '2026-11-01T00:00:00Z')`,
	} {
		if _, err := old.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	old.Close()
	store, err := storage.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	p, err := store.PrincipalByName(context.Background(), "acme", "alice")
	if left := time.Until(p.TokenExpiresAt); err != nil || left < 89*24*time.Hour {
		t.Errorf("alice after the migration: %v, token expires in %s", err, left)
	}
}
