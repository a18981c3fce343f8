package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nexo-io/nexo-edge/contract/protocol"
	"github.com/nexo-io/nexo-edge/controlplane/cli"
	"github.com/nexo-io/nexo-edge/test/framework/testcluster"
)

func runCLI(t *testing.T, ctx context.Context, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	root := cli.NewRootCmd(&out)
	root.SetArgs(args)
	root.SetErr(&out)
	err := root.ExecuteContext(ctx)
	return out.String(), err
}

// serve runs controlplane serve on a free loopback port with a new key, the admin token
// admin-secret (file dir/admin) and the database dir/cp.db, until the test ends; it returns the
// URL once the server answers.
func serve(t *testing.T, dir string, extra ...string) string {
	t.Helper()
	p := func(n string) string { return filepath.Join(dir, n) }
	_ = os.WriteFile(p("admin"), []byte("admin-secret\n"), 0o600)
	if _, err := runCLI(t, context.Background(), "keygen", "--out", p("cp.key")); err != nil {
		t.Fatal(err)
	}
	port, _ := testcluster.FreePort()
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := runCLI(t, ctx, append([]string{"serve", "--db", p("cp.db"), "--listen", addr, "--signing-key", p("cp.key"), "--admin-token-file", p("admin")}, extra...)...)
		done <- err
	}()
	t.Cleanup(func() { cancel(); <-done })
	server := "http://" + addr
	for i := 0; i < 100; i++ {
		if _, err := http.Get(server + "/"); err == nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	return server
}

func TestServeRegisterDeploy(t *testing.T) {
	dir := t.TempDir()
	p := func(n string) string { return filepath.Join(dir, n) }
	server := serve(t, dir, "--heartbeat-interval", "5s")
	common := []string{"--server", server, "--admin-token-file", p("admin")}
	out, err := runCLI(t, context.Background(), append(common, "env", "create", "demo", "--token-out", p("token"))...)
	if err != nil || !strings.Contains(out, "only shown this once") {
		t.Fatalf("env create: %v %s", err, out)
	}
	token, _ := os.ReadFile(p("token"))
	if strings.Contains(out, string(token)) {
		t.Error("the token was printed although --token-out was given")
	}
	envID := strings.Fields(out)[1]
	_ = os.WriteFile(p("m.yaml"), []byte("apiVersion: nexo.io/v1alpha1\nkind: NexoRateLimit\nmetadata: {name: rl, namespace: shop}\nspec: {operationsPerSecond: 5}\n"), 0o644)
	if out, err := runCLI(t, context.Background(), append(common, "command", "deploy", envID, "-f", p("m.yaml"), "--namespace", "shop")...); err != nil {
		t.Fatalf("deploy: %v %s", err, out)
	}
	if _, err := runCLI(t, context.Background(), append(common, "command", "uninstall", envID, "--proxy", "bad")...); err == nil {
		t.Error("uninstall with a malformed --proxy was accepted")
	}

	hb, _ := json.Marshal(protocol.Heartbeat{ProtocolVersion: protocol.Version, ClusterID: "c1"})
	req, _ := http.NewRequest("POST", server+"/v1/heartbeat", bytes.NewReader(hb))
	req.Header.Set("Authorization", "Bearer "+string(token))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var r protocol.HeartbeatResponse
	_ = json.NewDecoder(resp.Body).Decode(&r)
	resp.Body.Close()
	if len(r.Commands) != 1 || r.Commands[0].Type != protocol.Deploy || r.NextHeartbeatSeconds != 5 {
		t.Errorf("heartbeat response %+v", r)
	}
	if out, err := runCLI(t, context.Background(), append(common, "env", "list")...); err != nil || !strings.Contains(out, envID) || !strings.Contains(out, "healthy") {
		t.Errorf("env list after a heartbeat: %v\n%s", err, out)
	}
	out, err = runCLI(t, context.Background(), append(common, "env", "rotate-token", envID, "--token-out", p("token2"), "--grace", "1h")...)
	newToken, _ := os.ReadFile(p("token2"))
	if err != nil || len(newToken) == 0 || strings.Contains(out, string(newToken)) || !strings.Contains(out, "nexoctl install --token-file") {
		t.Errorf("env rotate-token: %v\n%s", err, out)
	}
	// The audit history: what was done, by whom, and a refused request with its reason.
	if _, err := runCLI(t, context.Background(), append(common, "command", "uninstall", "no-such-env", "--proxy", "shop/x")...); err == nil {
		t.Error("an uninstall for an unknown environment was accepted")
	}
	out, err = runCLI(t, context.Background(), append(common, "audit", "list")...)
	for _, want := range []string{"environment.create", "command.queue", "command.deliver", "environment.rotate-token", "refused", "manager:" + envID} {
		if err != nil || !strings.Contains(out, want) {
			t.Errorf("audit list lacks %q: %v\n%s", want, err, out)
		}
	}
	if strings.Contains(out, string(token)) || strings.Contains(out, string(newToken)) || strings.Contains(out, "operationsPerSecond") {
		t.Errorf("audit list shows a token or a manifest:\n%s", out)
	}
	out, err = runCLI(t, context.Background(), append(common, "audit", "list", "--decision", "refused", "--limit", "1")...)
	if err != nil || strings.Count(out, "\n") != 2 || !strings.Contains(out, "refused") {
		t.Errorf("audit list --decision refused --limit 1: %v\n%s", err, out)
	}
	if out, err := runCLI(t, context.Background(), append(common, "audit", "verify")...); err != nil || !strings.Contains(out, "verifies") {
		t.Errorf("audit verify: %v\n%s", err, out)
	}
}

func TestServeRefusesPlainHTTPOffLoopback(t *testing.T) {
	_, err := runCLI(t, context.Background(), "serve", "--listen", "0.0.0.0:0")
	if err == nil || !strings.Contains(err.Error(), "TLS is required off loopback") {
		t.Fatalf("got %v", err)
	}
}

// The tenancy commands, as a platform admin and then as a tenant admin with its own token:
// tenant, principals and roles, project, environment with labels and namespace targets, a stage
// and its targets; a deploy the cluster has not allowed is refused with the reason; a viewer may
// not change a stage; the tenant admin reads the tenant's audit.
func TestTenancyCommands(t *testing.T) {
	dir := t.TempDir()
	p := func(n string) string { return filepath.Join(dir, n) }
	server := serve(t, dir)
	as := func(token string, args ...string) (string, error) {
		flag := []string{"--server", server, "--admin-token-file", p("admin")}
		if token != "" {
			flag = append(flag, "--token-file", p(token))
		}
		return runCLI(t, context.Background(), append(flag, args...)...)
	}
	for _, step := range [][]string{
		{"", "tenant", "create", "acme"},
		{"", "principal", "create", "alice", "--tenant", "acme", "--token-out", p("alice")},
		{"", "principal", "bind", "alice", "--tenant", "acme", "--role", "tenant-admin"},
		{"alice", "project", "create", "shop", "--tenant", "acme"},
		{"alice", "principal", "create", "dave", "--tenant", "acme", "--token-out", p("dave")},
		{"alice", "principal", "bind", "dave", "--tenant", "acme", "--role", "viewer", "--project", "shop"},
		{"alice", "env", "create", "eu", "--tenant", "acme", "--token-out", p("eu-token")},
	} {
		if out, err := as(step[0], step[1:]...); err != nil {
			t.Fatalf("%v: %v\n%s", step[1:], err, out)
		}
	}
	out, _ := as("alice", "audit", "list", "--tenant", "acme", "--action", "environment.manage")
	envID := ""
	for _, f := range strings.Fields(out) {
		if len(f) == 12 {
			envID = f
		}
	}
	if envID == "" {
		t.Fatalf("no environment in the tenant's audit:\n%s", out)
	}
	for _, step := range [][]string{
		{"env", "label", envID, "env=production,team=payments", "region=eu-west", "--tenant", "acme"},
		{"env", "target", envID, "web", "tier=web", "--tenant", "acme"},
		{"stage", "set", "prod", "--tenant", "acme", "--project", "shop", "--environments", "env=production,team=payments", "--namespaces", "tier=web"},
	} {
		if out, err := as("alice", step...); err != nil {
			t.Fatalf("%v: %v\n%s", step, err, out)
		}
	}
	out, err := as("dave", "stage", "targets", "prod", "--tenant", "acme", "--project", "shop")
	if err != nil || !strings.Contains(out, envID+"  web        true      false") || !strings.Contains(out, "has not reported") {
		t.Errorf("stage targets as a viewer: %v\n%s", err, out)
	}
	_ = os.WriteFile(p("m.yaml"), []byte("apiVersion: nexo.io/v1alpha1\nkind: NexoRateLimit\nmetadata: {name: rl, namespace: web}\nspec: {operationsPerSecond: 5}\n"), 0o644)
	if _, err := as("alice", "stage", "deploy", "prod", "--tenant", "acme", "--project", "shop", "--env", envID, "--namespace", "web", "-f", p("m.yaml")); err == nil || !strings.Contains(err.Error(), "has not reported") {
		t.Errorf("deploy before the cluster reported its limits: %v", err)
	}
	// The entitlement: the admin token sets it, the tenant admin reads it, bad dates are refused.
	if out, err := as("", "tenant", "entitlement", "acme", "--max-proxies", "5", "--expires", "2099-12-31"); err != nil || !strings.Contains(out, "at most 5 proxies, until 2099-12-31T00:00:00Z") {
		t.Errorf("setting the entitlement: %v\n%s", err, out)
	}
	if out, err := as("alice", "tenant", "entitlement", "acme"); err != nil || !strings.Contains(out, "at most 5 proxies") {
		t.Errorf("the tenant admin reading the entitlement: %v\n%s", err, out)
	}
	if _, err := as("", "tenant", "entitlement", "acme", "--max-proxies", "5", "--expires", "next year"); err == nil || !strings.Contains(err.Error(), "want a date") {
		t.Errorf("a bad date: %v", err)
	}
	if _, err := as("dave", "stage", "set", "prod", "--tenant", "acme", "--project", "shop", "--environments", "env=staging", "--namespaces", "tier=web"); err == nil || !strings.Contains(err.Error(), "may not stage.set") {
		t.Errorf("a viewer set a stage: %v", err)
	}
	if _, err := as("alice", "stage", "set", "prod", "--tenant", "acme", "--project", "shop", "--environments", "env in (a,b)", "--namespaces", "tier=web"); err == nil || !strings.Contains(err.Error(), "not key=value") {
		t.Errorf("an expression selector: %v", err)
	}
	out, err = as("alice", "audit", "list", "--tenant", "acme", "--decision", "refused")
	if err != nil || !strings.Contains(out, "principal:acme/dave") || !strings.Contains(out, "stage.set") || !strings.Contains(out, "deploy") {
		t.Errorf("the tenant's refusals: %v\n%s", err, out)
	}
	for _, secret := range []string{"alice", "dave"} {
		tok, _ := os.ReadFile(p(secret))
		if strings.Contains(out, string(tok)) {
			t.Errorf("the audit shows %s's token", secret)
		}
	}
	// Revocation: review, rotate, unbind, delete; the tenant admin rotates its connect token.
	daveToken, _ := os.ReadFile(p("dave"))
	if out, err := as("alice", "principal", "list", "--tenant", "acme"); err != nil || !strings.Contains(out, "dave   viewer@shop") || strings.Contains(out, string(daveToken)) {
		t.Errorf("principal list: %v\n%s", err, out)
	}
	if out, err := as("alice", "principal", "rotate-token", "dave", "--tenant", "acme", "--token-out", p("dave2"), "--expires-in", "24h"); err != nil || strings.Contains(out, "nexo-principal-") {
		t.Errorf("rotate dave's token: %v\n%s", err, out)
	}
	if _, err := as("dave", "stage", "targets", "prod", "--tenant", "acme", "--project", "shop"); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("dave's rotated-away token: %v", err)
	}
	if _, err := as("dave2", "stage", "targets", "prod", "--tenant", "acme", "--project", "shop"); err != nil {
		t.Errorf("dave's new token: %v", err)
	}
	if _, err := as("alice", "principal", "unbind", "dave", "--tenant", "acme", "--role", "viewer", "--project", "shop"); err != nil {
		t.Errorf("unbind: %v", err)
	}
	if _, err := as("dave2", "stage", "targets", "prod", "--tenant", "acme", "--project", "shop"); err == nil || !strings.Contains(err.Error(), "403") {
		t.Errorf("dave after unbind: %v", err)
	}
	if _, err := as("alice", "principal", "delete", "dave", "--tenant", "acme"); err != nil {
		t.Errorf("delete: %v", err)
	}
	if _, err := as("dave2", "stage", "targets", "prod", "--tenant", "acme", "--project", "shop"); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("a deleted principal: %v", err)
	}
	if out, err := as("alice", "env", "rotate-token", envID, "--tenant", "acme", "--token-out", p("eu-token2"), "--grace", "1h"); err != nil || !strings.Contains(out, "written to") {
		t.Errorf("the tenant admin rotating its connect token: %v\n%s", err, out)
	}
	// serve created the key-encryption key beside the database, readable by its owner only, and
	// anchored the audit history.
	if fi, err := os.Stat(p("cp.db.kek")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the key-encryption key file: %v %v", fi, err)
	}
	if out, err := as("", "audit", "verify"); err != nil || !strings.Contains(out, "anchored") {
		t.Errorf("audit verify: %v\n%s", err, out)
	}
}

// The change-management commands against a real Control Plane: revisions and their diff, a
// preview answered by a (scripted) Manager and printed, a freeze that a deploy names, health,
// status and promotions.
func TestChangeManagementCommands(t *testing.T) {
	dir := t.TempDir()
	p := func(n string) string { return filepath.Join(dir, n) }
	server := serve(t, dir, "--heartbeat-interval", "5s")
	ctx := context.Background()
	common := []string{"--server", server, "--admin-token-file", p("admin")}
	run := func(args ...string) string {
		t.Helper()
		out, err := runCLI(t, ctx, append(common, args...)...)
		if err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	run("tenant", "create", "acme")
	run("project", "create", "shop", "--tenant", "acme")
	run("tenant", "entitlement", "acme", "--max-proxies", "5", "--expires", time.Now().Add(24*time.Hour).UTC().Format(time.RFC3339))
	envID := strings.Fields(run("env", "create", "eu", "--tenant", "acme", "--token-out", p("token")))[1]
	run("env", "label", envID, "env=prod", "--tenant", "acme")
	run("env", "target", envID, "web", "tier=web", "--tenant", "acme")
	run("stage", "set", "prod", "--tenant", "acme", "--project", "shop", "--environments", "env=prod", "--namespaces", "tier=web")
	scope := []string{"--tenant", "acme", "--project", "shop"}
	for i, ops := range []int{5, 20} {
		file := p(fmt.Sprintf("r%d.yaml", i))
		_ = os.WriteFile(file, []byte(fmt.Sprintf("apiVersion: nexo.io/v1alpha1\nkind: NexoRateLimit\nmetadata: {name: rl, namespace: web}\nspec: {operationsPerSecond: %d}\n", ops)), 0o644)
		if out := run(append([]string{"revision", "create", "-f", file, "--message", fmt.Sprintf("%d per second", ops)}, scope...)...); !strings.Contains(out, fmt.Sprintf("revision %d of project acme/shop: 1 objects, sha256:", i+1)) {
			t.Errorf("revision create: %s", out)
		}
	}
	if out := run(append([]string{"revision", "list"}, scope...)...); !strings.Contains(out, "20 per second") || strings.Index(out, "\n2 ") > strings.Index(out, "\n1 ") {
		t.Errorf("revision list (newest first):\n%s", out)
	}
	if out := run(append([]string{"revision", "diff", "1", "2"}, scope...)...); !strings.Contains(out, "changed NexoRateLimit web/rl") || !strings.Contains(out, "replace /spec/operationsPerSecond = 20") {
		t.Errorf("revision diff:\n%s", out)
	}
	// The environment's Manager: it reports its limits, then answers the preview.
	token, _ := os.ReadFile(p("token"))
	post := func(path string, body any, out any) {
		t.Helper()
		raw, _ := json.Marshal(body)
		req, _ := http.NewRequest("POST", server+path, bytes.NewReader(raw))
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(token)))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode >= 300 {
			t.Fatalf("%s: %v %v", path, err, resp)
		}
		defer resp.Body.Close()
		if out != nil {
			_ = json.NewDecoder(resp.Body).Decode(out)
		}
	}
	var hb protocol.HeartbeatResponse
	beat := protocol.Heartbeat{ProtocolVersion: protocol.Version, ClusterID: "c1", Capabilities: []string{protocol.CapPreview, protocol.CapDeploy},
		Limits: &protocol.Limits{Namespaces: []string{"web"}, ImageRepositories: []string{}}}
	post("/v1/heartbeat", beat, &hb)
	// A Manager that reports no promotion contract: compatibility unknown, overridden (the admin).
	queued := run(append([]string{"stage", "preview", "prod", "--env", envID, "--revision", "2", "--override-compatibility"}, scope...)...)
	id := strings.Fields(queued)[1]
	post("/v1/heartbeat", beat, &hb)
	if len(hb.Commands) != 1 || hb.Commands[0].ID != id {
		t.Fatalf("delivered %+v", hb.Commands)
	}
	post("/v1/commands/"+id+"/ack", protocol.Ack{Status: protocol.Applied, Preview: &protocol.PreviewResult{
		Objects: []protocol.ObjectPreview{{Kind: "NexoRateLimit", Namespace: "web", Name: "rl", Outcome: protocol.ObjectChanged, Changes: []protocol.FieldChange{{Op: "replace", Path: "/spec/operationsPerSecond", Value: 20}}}},
		Proxies: []protocol.ProxyPreview{{Namespace: "web", Name: "orders", Before: "aaa", After: "bbb", Outcome: protocol.ProxyRolls}},
		Summary: protocol.PreviewSummary{Changed: 1, Rolls: 1}}}, nil)
	shown := run(append([]string{"preview", "show", id}, scope...)...)
	for _, want := range []string{"revision 2 in " + envID + ": 0 created, 1 changed", "NexoRateLimit web/rl  changed  replace /spec/operationsPerSecond", "web/orders  aaa     bbb    rolls"} {
		if !strings.Contains(shown, want) {
			t.Errorf("preview show lacks %q:\n%s", want, shown)
		}
	}
	run(append([]string{"stage", "freeze", "prod", "--reason", "incident 7"}, scope...)...)
	if out, err := runCLI(t, ctx, append(common, append([]string{"stage", "deploy", "prod", "--env", envID, "--revision", "2"}, scope...)...)...); err == nil || !strings.Contains(err.Error()+out, "incident 7") {
		t.Errorf("deploy into a frozen stage: %v %s", err, out)
	}
	run(append([]string{"stage", "thaw", "prod"}, scope...)...)
	if out := run(append([]string{"stage", "deploy", "prod", "--env", envID, "--revision", "2", "--override-compatibility"}, scope...)...); !strings.Contains(out, "revision 2") || !strings.Contains(out, "previewed as "+id) {
		t.Errorf("deploy of the previewed revision: %s", out)
	}
	if out := run(append([]string{"stage", "status", "prod"}, scope...)...); !strings.Contains(out, envID) || !strings.Contains(out, "Pending") {
		t.Errorf("stage status:\n%s", out)
	}
	if out := run("env", "health", envID, "--tenant", "acme"); !strings.Contains(out, "healthy") || !strings.Contains(out, "promotion contract false") {
		t.Errorf("env health: %s", out)
	}
	if out, err := runCLI(t, ctx, append(common, append([]string{"stage", "promote", "prod", "--revision", "2"}, scope...)...)...); err == nil || !strings.Contains(err.Error()+out, "promotes from no stage") {
		t.Errorf("promote into a stage without an upstream: %v %s", err, out)
	}
}
