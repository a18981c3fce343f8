package controlplane_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nexo-io/nexo-edge/contract/protocol"
	"github.com/nexo-io/nexo-edge/controlplane"
	"github.com/nexo-io/nexo-edge/controlplane/storage"
	"github.com/nexo-io/nexo-edge/controlplane/targeting"
	"github.com/nexo-io/nexo-edge/test/framework/testcontrolplane"
)

const shop = acme + "/projects/shop"

func rateLimit(ns, name string, perSecond int) json.RawMessage {
	return json.RawMessage(`{"apiVersion":"nexo.io/v1alpha1","kind":"NexoRateLimit","metadata":{"name":"` + name + `","namespace":"` + ns + `"},"spec":{"operationsPerSecond":` + itoa(perSecond) + `}}`)
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// revision records manifests as shop's next revision (as the editor) and returns its number.
func (tn *tenancy) revision(t *testing.T, message string, manifests ...json.RawMessage) int64 {
	t.Helper()
	var rev controlplane.RevisionView
	if code := tn.do("POST", shop+"/revisions", tn.tokens[targeting.Editor], controlplane.NewRevision{Message: message, Manifests: manifests}, &rev); code != 201 {
		t.Fatalf("revision %q: %d", message, code)
	}
	return rev.Number
}

// manager is env's Manager: it reports its inventory, takes its commands and acknowledges each
// with the prediction (the proxies' graph revisions) given for its type.
func (tn *tenancy) manager(t *testing.T, env controlplane.NewEnvironment, hb protocol.Heartbeat, predict func(protocol.Command) *protocol.PreviewResult) []protocol.Command {
	t.Helper()
	if hb.Limits == nil {
		hb.Limits = &protocol.Limits{Namespaces: []string{"*"}, ImageRepositories: []string{"*"}}
	}
	var resp protocol.HeartbeatResponse
	if code := tn.do("POST", "/v1/heartbeat", env.Token, hb, &resp); code != 200 {
		t.Fatalf("heartbeat: %d", code)
	}
	for _, cmd := range resp.Commands {
		ack := protocol.Ack{Status: protocol.Applied}
		if predict != nil {
			ack.Preview = predict(cmd)
		}
		if code := tn.do("POST", "/v1/commands/"+cmd.ID+"/ack", env.Token, ack, nil); code != 204 {
			t.Fatalf("ack %s: %d", cmd.ID, code)
		}
	}
	return resp.Commands
}

// ready is an inventory entry of a proxy running graph revision rev, rolled out and Ready.
func ready(ns, name, rev string) protocol.Deployment {
	return protocol.Deployment{Namespace: ns, Name: name, Replicas: 1, ReadyReplicas: 1, GraphRevision: rev, AvailableRevision: rev, Phase: "Ready"}
}

func predicts(ns, name, after string) func(protocol.Command) *protocol.PreviewResult {
	return func(protocol.Command) *protocol.PreviewResult {
		return &protocol.PreviewResult{Proxies: []protocol.ProxyPreview{{Namespace: ns, Name: name, After: after, Outcome: protocol.ProxyRolls}}}
	}
}

// Revisions are numbered, immutable and diffed per object and per field; bad input is refused
// with what to fix and records nothing.
func TestRevisionsAndTheirDiff(t *testing.T) {
	tn := newTenancy(t)
	one := tn.revision(t, "first", proxyIn("web", "orders"), rateLimit("web", "rl", 5))
	two := tn.revision(t, "faster", rateLimit("web", "rl", 20), rateLimit("web", "burst", 100))
	if one != 1 || two != 2 {
		t.Fatalf("revisions %d, %d, want 1, 2", one, two)
	}
	var list struct{ Revisions []storage.Revision }
	if code := tn.do("GET", shop+"/revisions", tn.tokens[targeting.Viewer], nil, &list); code != 200 || len(list.Revisions) != 2 || list.Revisions[0].Number != 2 ||
		list.Revisions[0].Author != "principal:acme/carol" || list.Revisions[0].Message != "faster" || !strings.HasPrefix(list.Revisions[0].Digest, "sha256:") {
		t.Fatalf("list: %d %+v", code, list.Revisions)
	}
	var shown controlplane.RevisionView
	if code := tn.do("GET", shop+"/revisions/1", tn.tokens[targeting.Viewer], nil, &shown); code != 200 || len(shown.Manifests) != 2 ||
		!slices.Equal(shown.Objects, []string{"NexoProxy web/orders", "NexoRateLimit web/rl"}) {
		t.Fatalf("show: %d %+v", code, shown.Objects)
	}
	var d controlplane.RevisionDiff
	if code := tn.do("GET", shop+"/revisions/2/diff?from=1", tn.tokens[targeting.Viewer], nil, &d); code != 200 {
		t.Fatalf("diff: %d", code)
	}
	changes := map[string]controlplane.ObjectDiff{}
	for _, o := range d.Objects {
		changes[o.Kind+" "+o.Name] = o
	}
	if len(d.Objects) != 3 || changes["NexoRateLimit burst"].Change != "added" || changes["NexoProxy orders"].Change != "removed" ||
		changes["NexoRateLimit rl"].Change != "changed" || len(changes["NexoRateLimit rl"].Fields) != 1 ||
		changes["NexoRateLimit rl"].Fields[0].Path != "/spec/operationsPerSecond" || changes["NexoRateLimit rl"].Fields[0].Value != float64(20) {
		t.Fatalf("diff 1 → 2: %+v", d.Objects)
	}
	// The same content twice is the same digest; a revision cannot be changed (no route).
	three := tn.revision(t, "again", rateLimit("web", "burst", 100), rateLimit("web", "rl", 20))
	var r2, r3 controlplane.RevisionView
	tn.do("GET", shop+"/revisions/2", admin, nil, &r2)
	tn.do("GET", shop+"/revisions/3", admin, nil, &r3)
	if three != 3 || r2.Digest != r3.Digest {
		t.Errorf("the same objects in another order: digests %s, %s", r2.Digest, r3.Digest)
	}
	if code := tn.do("PUT", shop+"/revisions/1", admin, controlplane.NewRevision{Manifests: []json.RawMessage{deployManifest}}, nil); code != 405 {
		t.Errorf("PUT a revision: %d, want 405", code)
	}

	for _, c := range []struct {
		name      string
		token     string
		manifests []json.RawMessage
		code      int
		says      string
	}{
		{"unknown kind", tn.tokens[targeting.Editor], []json.RawMessage{json.RawMessage(`{"apiVersion":"nexo.io/v1alpha1","kind":"NexoTeleporter","metadata":{"name":"x","namespace":"web"}}`)}, 400, "nexo.io kinds only"},
		{"a raw workload", tn.tokens[targeting.Editor], []json.RawMessage{json.RawMessage(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"x","namespace":"web"}}`)}, 400, "nexo.io kinds only"},
		{"another tenant's namespace", tn.tokens[targeting.Editor], []json.RawMessage{rateLimit("globex-web", "rl", 5)}, 400, "no namespace target of tenant acme"},
		{"no namespace", tn.tokens[targeting.Editor], []json.RawMessage{json.RawMessage(`{"apiVersion":"nexo.io/v1alpha1","kind":"NexoRateLimit","metadata":{"name":"x"},"spec":{}}`)}, 400, "needs metadata.namespace"},
		{"twice the same object", tn.tokens[targeting.Editor], []json.RawMessage{rateLimit("web", "rl", 5), rateLimit("web", "rl", 6)}, 400, "each object once"},
		{"nothing", tn.tokens[targeting.Editor], nil, 400, "needs manifests"},
		{"a viewer", tn.tokens[targeting.Viewer], []json.RawMessage{rateLimit("web", "rl", 5)}, 403, "revision.create"},
	} {
		var e protocol.Error
		if code := tn.do("POST", shop+"/revisions", c.token, controlplane.NewRevision{Manifests: c.manifests}, &e); code != c.code || !strings.Contains(e.Error, c.says) {
			t.Errorf("%s: %d %q, want %d saying %q", c.name, code, e.Error, c.code, c.says)
		}
	}
	tn.do("GET", shop+"/revisions", admin, nil, &list)
	if len(list.Revisions) != 3 {
		t.Errorf("refused revisions were recorded: %d revisions", len(list.Revisions))
	}
	var e protocol.Error
	if code := tn.do("GET", shop+"/revisions/9/diff?from=1", admin, nil, &e); code != 404 || !strings.Contains(e.Error, "no revision 9") {
		t.Errorf("diff against a missing revision: %d %q", code, e.Error)
	}
}

// A deploy names a revision (raw manifests become one); the stage's status follows it from
// Pending to Synced with the graph revisions its acknowledgement predicted.
func TestDeployRunsARevisionUntilSynced(t *testing.T) {
	tn := newTenancy(t)
	editor := tn.tokens[targeting.Editor]
	tn.manager(t, tn.env, heartbeat("cluster-eu"), nil)
	var ans controlplane.DeployAnswer
	var e protocol.Error
	if code := tn.do("POST", shop+"/stages/prod/deploy", editor, controlplane.StageDeploy{Environment: tn.env.ID, Namespace: "web", Manifests: []json.RawMessage{proxyIn("web", "orders")}}, &ans); code != 201 || ans.Revision != 1 {
		t.Fatalf("a deploy of raw manifests: %d %+v", code, ans)
	}
	rev := tn.revision(t, "faster", proxyIn("web", "orders"), rateLimit("web", "rl", 20))
	if code := tn.do("POST", shop+"/stages/prod/deploy", editor, controlplane.StageDeploy{Environment: tn.env.ID, Revision: rev}, &ans); code != 201 || ans.Revision != rev || ans.Preview != nil {
		t.Fatalf("deploy revision %d: %d %+v %s", rev, code, ans, e.Error)
	}
	status := func() controlplane.StageRun {
		t.Helper()
		var out struct{ Environments []controlplane.StageRun }
		if code := tn.do("GET", shop+"/stages/prod/status", tn.tokens[targeting.Viewer], nil, &out); code != 200 || len(out.Environments) != 1 {
			t.Fatalf("status: %d %+v", code, out)
		}
		return out.Environments[0]
	}
	if st := status(); st.State != controlplane.RunPending || st.Revision != rev {
		t.Fatalf("queued: %+v", st)
	}
	hb := heartbeat("cluster-eu")
	hb.Deployments = []protocol.Deployment{ready("web", "orders", "old")}
	cmds := tn.manager(t, tn.env, hb, predicts("web", "orders", "new"))
	if len(cmds) != 2 || cmds[1].Type != protocol.Deploy || len(cmds[1].Manifests) != 2 {
		t.Fatalf("delivered: %+v", cmds)
	}
	if st := status(); st.State != controlplane.RunProgressing || st.Proxies[0].Predicted != "new" || st.Proxies[0].GraphRevision != "old" || st.Running != 0 {
		t.Fatalf("applied, still on the old graph: %+v", st)
	}
	hb.Deployments = []protocol.Deployment{ready("web", "orders", "new")}
	tn.manager(t, tn.env, hb, nil)
	st := status()
	if st.State != controlplane.RunSynced || st.SyncedSince == nil || st.Running != rev {
		t.Fatalf("on the predicted revision: %+v", st)
	}
	// A rollout through the stage re-signs the proxy: what its acknowledgement predicts
	// supersedes the deploy's, so the run is Progressing until the proxy runs it, then Synced.
	if code := tn.do("POST", shop+"/stages/prod/rollout", editor, controlplane.StageRollout{Environment: tn.env.ID, Image: "registry.example.com/nexo/proxy:2"}, &e); code != 201 {
		t.Fatalf("rollout: %d %s", code, e.Error)
	}
	tn.manager(t, tn.env, hb, predicts("web", "orders", "rolled"))
	if st := status(); st.State != controlplane.RunProgressing || st.Proxies[0].Predicted != "rolled" {
		t.Fatalf("after the rollout, before the proxy runs it: %+v", st)
	}
	hb.Deployments = []protocol.Deployment{ready("web", "orders", "rolled")}
	tn.manager(t, tn.env, hb, nil)
	if st := status(); st.State != controlplane.RunSynced {
		t.Fatalf("the rolled-out proxy Ready: %+v", st)
	}
	hb.Deployments = []protocol.Deployment{{Namespace: "web", Name: "orders", GraphRevision: "rolled", AvailableRevision: "rolled", Phase: "Degraded"}}
	tn.manager(t, tn.env, hb, nil)
	if st := status(); st.State != controlplane.RunDegraded || st.SyncedSince != nil || st.Running != rev {
		t.Fatalf("Degraded: %+v", st)
	}
	if code := tn.do("POST", shop+"/stages/prod/deploy", editor, controlplane.StageDeploy{Environment: tn.env.ID, Revision: rev, Namespace: "web"}, &e); code != 400 || !strings.Contains(e.Error, "not both") {
		t.Errorf("a revision and a namespace: %d %q", code, e.Error)
	}
	if code := tn.do("POST", shop+"/stages/prod/deploy", editor, controlplane.StageDeploy{Environment: tn.env.ID, Revision: 42}, &e); code != 404 || !strings.Contains(e.Error, "no revision 42") {
		t.Errorf("a missing revision: %d %q", code, e.Error)
	}
}

// A preview queues a command that changes nothing and counts against nothing; its answer is
// kept, and a deploy of the previewed revision says whether the environment changed since.
func TestPreviewIsKeptAndGoesStale(t *testing.T) {
	tn := newTenancy(t)
	editor := tn.tokens[targeting.Editor]
	tn.manager(t, tn.env, heartbeat("cluster-eu"), nil)
	rev := tn.revision(t, "three proxies", proxyIn("web", "a"), proxyIn("web", "b"), proxyIn("web", "c"))
	var queued struct{ ID string }
	if code := tn.do("POST", shop+"/stages/prod/preview", editor, controlplane.StagePreview{Environment: tn.env.ID, Revision: rev}, &queued); code != 201 || queued.ID == "" {
		t.Fatalf("preview: %d", code)
	}
	if carried, err := tn.store.CommandProxies(context.Background(), tn.env.ID); err != nil || len(carried[queued.ID]) != 0 {
		t.Errorf("a pending preview carries proxies that would count against the entitlement: %v %v", carried, err)
	}
	answer := &protocol.PreviewResult{Summary: protocol.PreviewSummary{Created: 3, Rolls: 3}}
	for _, n := range []string{"a", "b", "c"} {
		answer.Proxies = append(answer.Proxies, protocol.ProxyPreview{Namespace: "web", Name: n, After: "r-" + n, Outcome: protocol.ProxyRolls})
	}
	cmds := tn.manager(t, tn.env, heartbeat("cluster-eu"), func(c protocol.Command) *protocol.PreviewResult {
		if c.Type != protocol.Preview || len(c.Manifests) != 3 {
			t.Errorf("delivered %s with %d manifests", c.Type, len(c.Manifests))
		}
		return answer
	})
	if len(cmds) != 1 {
		t.Fatalf("delivered %d commands", len(cmds))
	}
	var view controlplane.PreviewView
	if code := tn.do("GET", shop+"/previews/"+queued.ID, tn.tokens[targeting.Viewer], nil, &view); code != 200 || view.Command != storage.CommandApplied ||
		view.Result == nil || view.Result.Summary.Rolls != 3 || len(view.Result.Proxies) != 3 || view.EnvironmentChanged {
		t.Fatalf("preview answer: %d %+v", code, view)
	}
	var deployed []storage.DesiredObject
	if deployed, _ = tn.store.Desired(context.Background(), tn.env.ID, "NexoProxy"); len(deployed) != 0 {
		t.Errorf("an applied preview entered the deployed set: %+v", deployed)
	}
	var ans controlplane.DeployAnswer
	if code := tn.do("POST", shop+"/stages/prod/deploy", editor, controlplane.StageDeploy{Environment: tn.env.ID, Revision: rev}, &ans); code != 201 ||
		ans.Preview == nil || ans.Preview.ID != queued.ID || ans.Preview.EnvironmentChanged {
		t.Fatalf("deploy of the previewed revision: %d %+v", code, ans)
	}
	tn.manager(t, tn.env, heartbeat("cluster-eu"), nil) // the deploy applies: the environment changed
	if code := tn.do("GET", shop+"/previews/"+queued.ID, editor, nil, &view); code != 200 || !view.EnvironmentChanged {
		t.Errorf("after a deploy applied, the preview still describes the environment: %+v", view)
	}
	var e protocol.Error
	if code := tn.do("GET", shop+"/previews/cmd-none", editor, nil, &e); code != 404 {
		t.Errorf("a missing preview: %d", code)
	}

	// A preview its Manager never answers is dead-lettered like any command, and says so.
	var unanswered struct{ ID string }
	tn.do("POST", shop+"/stages/prod/preview", editor, controlplane.StagePreview{Environment: tn.env.ID, Revision: rev}, &unanswered)
	for range storage.MaxDeliveries + 1 {
		if code := tn.do("POST", "/v1/heartbeat", tn.env.Token, heartbeat("cluster-eu"), nil); code != 200 {
			t.Fatalf("heartbeat: %d", code)
		}
	}
	var dead controlplane.PreviewView
	if code := tn.do("GET", shop+"/previews/"+unanswered.ID, editor, nil, &dead); code != 200 || dead.Command != storage.CommandDead ||
		!strings.Contains(dead.CommandMessage, "not acknowledged after 5 deliveries") || dead.Result != nil {
		t.Errorf("a preview never acknowledged: %d %+v", code, dead)
	}
}

// The compatibility gate refuses before queueing: a schema-only kind there, a kind not
// installed, a slot that does not take a kind; unknown compatibility (a 0.2.0 Manager) only a
// project manager may override, audited.
func TestCompatibilityGate(t *testing.T) {
	tn := newTenancy(t)
	editor, pm := tn.tokens[targeting.Editor], tn.tokens[targeting.ProjectManager]
	guard := json.RawMessage(`{"apiVersion":"nexo.io/v1alpha1","kind":"NexoQueryGuard","metadata":{"name":"g","namespace":"web"},"spec":{}}`)
	schemaOnly := tn.revision(t, "query guard", guard)
	pipeline := json.RawMessage(`{"apiVersion":"nexo.io/v1alpha1","kind":"NexoPipeline","metadata":{"name":"p","namespace":"web"},"spec":{"request":[{"kind":"NexoRateLimit","name":"rl"}]}}`)
	piped := tn.revision(t, "pipeline", pipeline, rateLimit("web", "rl", 5))
	plain := tn.revision(t, "plain", rateLimit("web", "rl", 5))
	queuedCommands := func() int {
		cmds, _ := tn.store.Commands(context.Background(), tn.env.ID)
		return len(cmds)
	}
	deploy := func(token string, rev int64, override bool) (int, string) {
		var e protocol.Error
		code := tn.do("POST", shop+"/stages/prod/deploy", token, controlplane.StageDeploy{Environment: tn.env.ID, Revision: rev, OverrideCompatibility: override}, &e)
		return code, e.Error
	}
	tn.manager(t, tn.env, heartbeat("cluster-eu"), nil)
	for _, c := range []struct {
		name string
		hb   func(*protocol.Heartbeat)
		rev  int64
		says []string
	}{
		{"schema-only there", nil, schemaOnly, []string{"NexoQueryGuard", "schema-only in environment " + tn.env.ID, "bundle 0.3.0, installed by helm"}},
		{"not installed there", func(hb *protocol.Heartbeat) {
			hb.InstalledKinds = slices.DeleteFunc(hb.InstalledKinds, func(k string) bool { return k == "NexoRateLimit" })
		}, plain, []string{"NexoRateLimit", "does not install"}},
		{"a slot that does not take it", func(hb *protocol.Heartbeat) { hb.PipelineKinds["request"] = []string{"NexoAuthPolicy"} }, piped,
			[]string{"puts NexoRateLimit in slot request", "it accepts NexoAuthPolicy"}},
	} {
		hb := heartbeat("cluster-eu")
		if c.hb != nil {
			c.hb(&hb)
		}
		tn.manager(t, tn.env, hb, nil)
		before := queuedCommands()
		for _, kind := range []string{"deploy", "preview"} {
			var e protocol.Error
			code := tn.do("POST", shop+"/stages/prod/"+kind, editor, map[string]any{"environment": tn.env.ID, "revision": c.rev}, &e)
			if code != 409 || !strings.Contains(e.Error, "nothing was queued") {
				t.Errorf("%s, %s: %d %q", c.name, kind, code, e.Error)
			}
			for _, s := range c.says {
				if !strings.Contains(e.Error, s) {
					t.Errorf("%s, %s: %q does not say %q", c.name, kind, e.Error, s)
				}
			}
		}
		if queuedCommands() != before {
			t.Errorf("%s: a refused command was queued", c.name)
		}
	}
	// A 0.2.0 Manager reports no promotion contract.
	tn.manager(t, tn.env, legacyHeartbeat("cluster-eu"), nil)
	if code, msg := deploy(editor, plain, false); code != 409 || !strings.Contains(msg, "compatibility unknown") || !strings.Contains(msg, "(0.2.0)") {
		t.Errorf("unknown compatibility: %d %q", code, msg)
	}
	if code, msg := deploy(editor, plain, true); code != 403 || !strings.Contains(msg, "compatibility.override") {
		t.Errorf("an editor overriding: %d %q", code, msg)
	}
	if code, msg := deploy(pm, plain, true); code != 201 {
		t.Fatalf("a project manager overriding: %d %q", code, msg)
	}
	page := tn.auditPage(t, "deploy")
	last := page[len(page)-1]
	if last.Decision != storage.Allowed || last.Actor != "principal:acme/bob" || !strings.Contains(last.Reason, "overridden by principal:acme/bob") {
		t.Errorf("the override's record: %+v", last)
	}
}

// auditPage returns acme's records of action, oldest first.
func (tn *tenancy) auditPage(t *testing.T, action string) []storage.AuditRecord {
	t.Helper()
	var page controlplane.AuditPage
	if code := tn.do("GET", acme+"/audit?action="+action+"&limit=1000", tn.tokens[targeting.TenantAdmin], nil, &page); code != 200 {
		t.Fatalf("audit: %d", code)
	}
	return page.Records
}

// Rollback deploys a revision that ran there again, at a higher signature revision; one that
// never ran there is refused.
func TestRollbackToARevisionThatRan(t *testing.T) {
	tn := newTenancy(t)
	pm := tn.tokens[targeting.ProjectManager]
	tn.manager(t, tn.env, heartbeat("cluster-eu"), nil)
	one := tn.revision(t, "slow", rateLimit("web", "rl", 5))
	two := tn.revision(t, "fast", rateLimit("web", "rl", 50))
	var e protocol.Error
	if code := tn.do("POST", shop+"/stages/prod/rollback", pm, controlplane.StageRollback{Environment: tn.env.ID, To: one}, &e); code != 409 || !strings.Contains(e.Error, "never ran in environment") {
		t.Fatalf("rollback to a revision that never ran: %d %q", code, e.Error)
	}
	for _, rev := range []int64{one, two} {
		if code := tn.do("POST", shop+"/stages/prod/deploy", tn.tokens[targeting.Editor], controlplane.StageDeploy{Environment: tn.env.ID, Revision: rev}, &e); code != 201 {
			t.Fatalf("deploy %d: %d %s", rev, code, e.Error)
		}
		tn.manager(t, tn.env, heartbeat("cluster-eu"), nil)
	}
	if code := tn.do("POST", shop+"/stages/prod/rollback", tn.tokens[targeting.Editor], controlplane.StageRollback{Environment: tn.env.ID, To: one}, &e); code != 403 {
		t.Errorf("an editor rolls back: %d", code)
	}
	var ans controlplane.DeployAnswer
	if code := tn.do("POST", shop+"/stages/prod/rollback", pm, controlplane.StageRollback{Environment: tn.env.ID, To: one}, &ans); code != 201 || ans.Revision != one {
		t.Fatalf("rollback: %d %+v", code, ans)
	}
	cmds := tn.manager(t, tn.env, heartbeat("cluster-eu"), nil)
	if len(cmds) != 1 {
		t.Fatalf("delivered %d", len(cmds))
	}
	var u map[string]any
	_ = json.Unmarshal(cmds[0].Manifests[0], &u)
	ann := u["metadata"].(map[string]any)["annotations"].(map[string]any)
	spec := u["spec"].(map[string]any)
	if spec["operationsPerSecond"] != float64(5) || ann["nexo.io/signature-revision"] == "" {
		t.Fatalf("rolled back manifest: %v", u)
	}
	all, _ := tn.store.Commands(context.Background(), tn.env.ID)
	if last := all[len(all)-1]; last.ID != ans.ID || last.Seq <= all[len(all)-2].Seq {
		t.Errorf("the rollback is not the newest, highest command: %+v", all)
	}
	var status struct{ Environments []controlplane.StageRun }
	tn.do("GET", shop+"/stages/prod/status", pm, nil, &status)
	if len(status.Environments) != 1 || status.Environments[0].Revision != one || status.Environments[0].Via != storage.ViaRollback {
		t.Errorf("status after the rollback: %+v", status.Environments)
	}
}

// Promotion: refused before the upstream stage runs the revision Synced for the soak time;
// with approval required, a project manager other than the promoter approves; then the
// revision is deployed to every environment of the stage, all recorded.
func TestPromotionSoakAndApproval(t *testing.T) {
	tn := newTenancy(t)
	ta, pm, editor := tn.tokens[targeting.TenantAdmin], tn.tokens[targeting.ProjectManager], tn.tokens[targeting.Editor]
	var dev controlplane.NewEnvironment
	tn.do("POST", acme+"/environments", ta, map[string]string{"name": "dev"}, &dev)
	tn.do("PUT", acme+"/environments/"+dev.ID+"/labels", ta, map[string]any{"labels": map[string]string{"env": "dev", "team": "payments"}}, nil)
	tn.do("PUT", acme+"/environments/"+dev.ID+"/namespace-targets/web", ta, map[string]any{"labels": map[string]string{"tier": "web"}}, nil)
	var e protocol.Error
	if code := tn.do("PUT", shop+"/stages/dev", pm, controlplane.StageSpec{Environments: map[string]string{"env": "dev"}, Namespaces: map[string]string{"tier": "web"}}, &e); code != 200 {
		t.Fatalf("stage dev: %d %s", code, e.Error)
	}
	prod := controlplane.StageSpec{Environments: map[string]string{"env": "production", "team": "payments"}, Namespaces: map[string]string{"tier": "web"},
		PromotesFrom: "dev", SoakSeconds: 60, RequiresApproval: true}
	if code := tn.do("PUT", shop+"/stages/prod", pm, prod, &e); code != 200 {
		t.Fatalf("stage prod: %d %s", code, e.Error)
	}
	for _, bad := range []struct {
		stage string
		spec  controlplane.StageSpec
		says  string
	}{
		{"dev", controlplane.StageSpec{Environments: map[string]string{"env": "dev"}, Namespaces: map[string]string{"tier": "web"}, PromotesFrom: "prod"}, "leads back"},
		{"qa", controlplane.StageSpec{Environments: map[string]string{"env": "qa"}, Namespaces: map[string]string{"tier": "web"}, PromotesFrom: "staging"}, "does not have"},
		{"qa", controlplane.StageSpec{Environments: map[string]string{"env": "qa"}, Namespaces: map[string]string{"tier": "web"}, SoakSeconds: 5}, "promotes from another"},
	} {
		if code := tn.do("PUT", shop+"/stages/"+bad.stage, pm, bad.spec, &e); code != 400 || !strings.Contains(e.Error, bad.says) {
			t.Errorf("stage %s %+v: %d %q", bad.stage, bad.spec, code, e.Error)
		}
	}
	tn.manager(t, dev, heartbeat("cluster-dev"), nil)
	tn.manager(t, tn.env, heartbeat("cluster-eu"), nil)
	rev := tn.revision(t, "orders", proxyIn("web", "orders"))
	promote := func(token string) (int, storage.PromotionRecord, string) {
		var rec storage.PromotionRecord
		var e protocol.Error
		raw := map[string]any{}
		code := tn.do("POST", shop+"/stages/prod/promote", token, controlplane.StagePromote{Revision: rev}, &raw)
		b, _ := json.Marshal(raw)
		_ = json.Unmarshal(b, &rec)
		_ = json.Unmarshal(b, &e)
		return code, rec, e.Error
	}
	if code, _, msg := promote(pm); code != 409 || !strings.Contains(msg, dev.ID+" runs nothing of stage dev") {
		t.Fatalf("promotion before dev runs it: %d %q", code, msg)
	}
	if code := tn.do("POST", shop+"/stages/prod/deploy", editor, controlplane.StageDeploy{Environment: tn.env.ID, Revision: rev}, &e); code != 409 || !strings.Contains(e.Error, "by promotion from stage dev") {
		t.Errorf("a direct deploy to prod: %d %q", code, e.Error)
	}
	if code := tn.do("POST", shop+"/stages/dev/deploy", editor, controlplane.StageDeploy{Environment: dev.ID, Revision: rev}, &e); code != 201 {
		t.Fatalf("deploy to dev: %d %s", code, e.Error)
	}
	hb := heartbeat("cluster-dev")
	tn.manager(t, dev, hb, predicts("web", "orders", "g1"))
	if code, _, msg := promote(pm); code != 409 || !strings.Contains(msg, "not Synced on it yet") {
		t.Fatalf("promotion before dev is Synced: %d %q", code, msg)
	}
	hb.Deployments = []protocol.Deployment{ready("web", "orders", "g1")}
	tn.manager(t, dev, hb, nil)
	if code, _, msg := promote(pm); code != 409 || !strings.Contains(msg, "of the 1m0s soak") {
		t.Fatalf("promotion before the soak: %d %q", code, msg)
	}
	tn.skew.Add(int64(61 * time.Second))
	tn.manager(t, tn.env, heartbeat("cluster-eu"), nil)
	tn.manager(t, dev, hb, nil)
	code, rec, msg := promote(pm)
	if code != 202 || rec.State != storage.PromotionAwaitingApproval || rec.Promoter != "principal:acme/bob" || len(rec.Targets) != 0 {
		t.Fatalf("promotion after the soak: %d %+v %q", code, rec, msg)
	}
	approve := func(token string) (int, string) {
		var e protocol.Error
		code := tn.do("POST", shop+"/promotions/"+rec.ID+"/approve", token, nil, &e)
		return code, e.Error
	}
	if code, msg := approve(editor); code != 403 || !strings.Contains(msg, "promotion.approve") {
		t.Errorf("an editor approves: %d %q", code, msg)
	}
	if code, msg := approve(pm); code != 403 || !strings.Contains(msg, "other than its promoter") {
		t.Errorf("the promoter approves: %d %q", code, msg)
	}
	if code, msg := approve(ta); code != 200 {
		t.Fatalf("another approves: %d %q", code, msg)
	}
	if code, msg := approve(ta); code != 409 {
		t.Errorf("approved twice: %d %q", code, msg)
	}
	var got storage.PromotionRecord
	tn.do("GET", shop+"/promotions/"+rec.ID, tn.tokens[targeting.Viewer], nil, &got)
	if got.State != storage.PromotionQueued || len(got.Approvals) != 1 || got.Approvals[0].Approver != "principal:acme/alice" ||
		len(got.Targets) != 1 || got.Targets[0].Environment != tn.env.ID || got.Targets[0].Via != storage.ViaPromotion {
		t.Fatalf("the promotion's record: %+v", got)
	}
	cmds := tn.manager(t, tn.env, heartbeat("cluster-eu"), nil)
	if len(cmds) != 1 || cmds[0].ID != got.Targets[0].CommandID || cmds[0].Type != protocol.Deploy {
		t.Fatalf("prod received %+v", cmds)
	}
	for _, a := range []string{"promotion.promote", "promotion.approve"} {
		if recs := tn.auditPage(t, a); len(recs) == 0 {
			t.Errorf("no %s record", a)
		}
	}
	if !slices.ContainsFunc(tn.auditPage(t, "promotion.approve"), func(r storage.AuditRecord) bool {
		return r.Decision == storage.Allowed && r.Actor == "principal:acme/alice" && strings.Contains(r.Reason, "queued "+got.Targets[0].CommandID)
	}) {
		t.Errorf("no allowed approval record naming the queued deploy")
	}
}

// A freeze refuses change with its reason until lifted; a preview still runs; both audited.
func TestFreezeRefusesChange(t *testing.T) {
	tn := newTenancy(t)
	ta, pm, editor := tn.tokens[targeting.TenantAdmin], tn.tokens[targeting.ProjectManager], tn.tokens[targeting.Editor]
	tn.manager(t, tn.env, heartbeat("cluster-eu"), nil)
	rev := tn.revision(t, "rl", rateLimit("web", "rl", 5))
	deploy := func() (int, string) {
		var e protocol.Error
		code := tn.do("POST", shop+"/stages/prod/deploy", editor, controlplane.StageDeploy{Environment: tn.env.ID, Revision: rev}, &e)
		return code, e.Error
	}
	var e protocol.Error
	if code := tn.do("PUT", shop+"/stages/prod/freeze", pm, controlplane.FreezeRequest{Reason: "incident 42: connection storms"}, &e); code != 200 {
		t.Fatalf("freeze the stage: %d %s", code, e.Error)
	}
	if code, msg := deploy(); code != 409 || !strings.Contains(msg, "incident 42: connection storms") || !strings.Contains(msg, "principal:acme/bob") {
		t.Errorf("deploy to a frozen stage: %d %q", code, msg)
	}
	if code := tn.do("POST", shop+"/stages/prod/preview", editor, controlplane.StagePreview{Environment: tn.env.ID, Revision: rev}, &e); code != 201 {
		t.Errorf("a preview during a freeze: %d %s", code, e.Error)
	}
	if code := tn.do("DELETE", shop+"/stages/prod/freeze", pm, nil, &e); code != 204 {
		t.Fatalf("lift: %d %s", code, e.Error)
	}
	if code, msg := deploy(); code != 201 {
		t.Fatalf("after the freeze: %d %q", code, msg)
	}
	tn.manager(t, tn.env, heartbeat("cluster-eu"), nil)
	if code := tn.do("PUT", acme+"/environments/"+tn.env.ID+"/freeze", pm, controlplane.FreezeRequest{Reason: "x"}, &e); code != 403 {
		t.Errorf("a project manager freezes an environment: %d", code)
	}
	until := time.Now().Add(time.Minute)
	if code := tn.do("PUT", acme+"/environments/"+tn.env.ID+"/freeze", ta, controlplane.FreezeRequest{Reason: "quarter-end close", Until: &until}, &e); code != 200 {
		t.Fatalf("freeze the environment: %d %s", code, e.Error)
	}
	if code := tn.do("POST", shop+"/stages/prod/rollout", editor, controlplane.StageRollout{Environment: tn.env.ID, Image: "registry.example.com/nexo/proxy:1"}, &e); code != 409 || !strings.Contains(e.Error, "quarter-end close") {
		t.Errorf("rollout into a frozen environment: %d %q", code, e.Error)
	}
	var h controlplane.EnvironmentHealth
	if code := tn.do("GET", acme+"/environments/"+tn.env.ID+"/health", tn.tokens[targeting.Viewer], nil, &h); code != 200 || h.State != controlplane.StateHealthy ||
		h.BundleVersion != "0.3.0" || !h.PromotionContract || len(h.Freezes) != 1 || h.Freezes[0].Reason != "quarter-end close" || h.Limits == nil {
		t.Errorf("health as a viewer: %d %+v", code, h)
	}
	tn.skew.Add(int64(2 * time.Minute)) // the freeze ends by itself
	tn.manager(t, tn.env, heartbeat("cluster-eu"), nil)
	if code, msg := deploy(); code != 201 {
		t.Errorf("after the freeze's end: %d %q", code, msg)
	}
	for _, c := range []struct{ action, reason string }{{"stage.freeze", "frozen: incident 42"}, {"stage.freeze", "freeze lifted"}, {"environment.freeze", "frozen: quarter-end close"}} {
		if !slices.ContainsFunc(tn.auditPage(t, c.action), func(r storage.AuditRecord) bool {
			return r.Decision == storage.Allowed && strings.Contains(r.Reason, c.reason)
		}) {
			t.Errorf("no %s record saying %q", c.action, c.reason)
		}
	}
	if code := tn.do("PUT", shop+"/stages/prod/freeze", pm, controlplane.FreezeRequest{Reason: " "}, &e); code != 400 || !strings.Contains(e.Error, "needs a reason") {
		t.Errorf("a freeze without a reason: %d %q", code, e.Error)
	}
}

// A principal's refused attempt in another tenant is in that tenant's history too.
func TestRefusalInAnotherTenantIsRecordedThere(t *testing.T) {
	tn := newTenancy(t)
	var mallory controlplane.NewPrincipal
	tn.do("POST", "/admin/tenants/globex/principals", admin, map[string]string{"name": "mallory"}, &mallory)
	tn.do("POST", "/admin/tenants/globex/role-bindings", admin, map[string]string{"principal": "mallory", "role": "tenant-admin"}, nil)
	if code := tn.do("GET", shop+"/revisions", mallory.Token, nil, nil); code != 403 {
		t.Fatalf("mallory reads acme's revisions: %d", code)
	}
	for _, tenant := range []string{"acme", "globex"} {
		var page controlplane.AuditPage
		tn.do("GET", "/admin/tenants/"+tenant+"/audit?action=revision.read", admin, nil, &page)
		if !slices.ContainsFunc(page.Records, func(r storage.AuditRecord) bool {
			return r.Actor == "principal:globex/mallory" && r.Decision == storage.Refused
		}) {
			t.Errorf("tenant %s's history lacks mallory's refused attempt: %+v", tenant, page.Records)
		}
	}
}

// serve's advice on a history edited in its middle is to restore a backup: moving the
// checkpoint aside cannot help, the chain itself is broken.
func TestEditedHistoryAdvice(t *testing.T) {
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	db := filepath.Join(t.TempDir(), "cp.db")
	c := start(t, db, key, func(o *testcontrolplane.Options) { o.Checkpoint = true })
	for i := 0; i < 3; i++ {
		c.do("POST", "/admin/tenants", admin, map[string]string{"name": "t" + itoa(i)}, nil)
	}
	sqldb, err := sql.Open("sqlite", "file:"+db+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sqldb.Exec(`DROP TRIGGER audit_no_update; UPDATE audit SET reason='nothing happened' WHERE seq=2`); err != nil {
		t.Fatal(err)
	}
	sqldb.Close()
	err = c.srv.Restart()
	if err == nil || !strings.Contains(err.Error(), "backup taken before record 2") || !strings.Contains(err.Error(), "does not help") {
		t.Errorf("serve on an edited history: %v", err)
	}
}
