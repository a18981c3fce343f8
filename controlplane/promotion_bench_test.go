package controlplane_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/nexo-io/nexo-edge/contract/protocol"
	"github.com/nexo-io/nexo-edge/controlplane"
	"github.com/nexo-io/nexo-edge/controlplane/storage"
	"github.com/nexo-io/nexo-edge/controlplane/targeting"
)

// BenchmarkPromoteTo100Environments: one promotion of a 20-object revision (10 NexoProxies and
// their graph) from stage canary, where it runs Synced, to stage prod's 100 environments,
// through the server and its SQLite file in one transaction: authentication, both stages'
// targets, the soak check, and per environment the freeze, ownership, entitlement and
// compatibility checks, signing every object for that environment, queueing, and the audit.
func BenchmarkPromoteTo100Environments(b *testing.B) {
	ctx := context.Background()
	cp, store, must := benchTenant(b)
	must(store.SetEntitlement(ctx, "acme", targeting.Entitlement{MaxProxies: 1 << 30, ExpiresAt: time.Now().Add(24 * time.Hour)}))
	must(store.SetStage(ctx, "acme", storage.StoredStage{Stage: targeting.Stage{Project: "shop", Name: "canary",
		Environments: targeting.Selector{"env": "canary"}, NamespaceTargets: targeting.Selector{"tier": "web"}}}))
	must(store.SetStage(ctx, "acme", storage.StoredStage{Stage: targeting.Stage{Project: "shop", Name: "prod",
		Environments: targeting.Selector{"env": "production"}, NamespaceTargets: targeting.Selector{"tier": "web"}}, Promotion: storage.Promotion{From: "canary"}}))
	beat := heartbeat("bench")
	beat.Limits = &protocol.Limits{Namespaces: []string{"*"}, ImageRepositories: []string{"*"}}
	body, _ := json.Marshal(beat)
	for i := range 101 {
		id, env := fmt.Sprintf("env%03d", i), "production"
		if i == 100 {
			id, env = "canary0", "canary"
		}
		must(store.CreateEnvironment(ctx, id, id, "hash-"+id))
		must(store.AssignEnvironment(ctx, id, "acme"))
		must(store.SetEnvironmentLabels(ctx, id, map[string]string{"env": env}))
		must(store.RecordHeartbeat(ctx, id, string(body), beat.Capabilities))
		must(store.SetNamespaceTarget(ctx, id, "web", map[string]string{"tier": "web"}))
	}
	var manifests []json.RawMessage
	var ready []protocol.Deployment
	for i := range 10 {
		name := fmt.Sprintf("p%02d", i)
		manifests = append(manifests, proxyIn("web", name), rateLimit("web", "rl-"+name, 10+i))
		ready = append(ready, protocol.Deployment{Namespace: "web", Name: name, Replicas: 1, ReadyReplicas: 1, GraphRevision: "g", AvailableRevision: "g", Phase: "Ready"})
	}
	call := func(path string, in, out any) int {
		raw, _ := json.Marshal(in)
		req, _ := http.NewRequest("POST", cp.URL+path, bytes.NewReader(raw))
		req.Header.Set("Authorization", "Bearer "+admin)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		defer resp.Body.Close()
		if out != nil {
			_ = json.NewDecoder(resp.Body).Decode(out)
		}
		return resp.StatusCode
	}
	var rev controlplane.RevisionView
	if code := call("/admin/tenants/acme/projects/shop/revisions", controlplane.NewRevision{Manifests: manifests}, &rev); code != 201 {
		b.Fatalf("revision: %d", code)
	}
	if code := call("/admin/tenants/acme/projects/shop/stages/canary/deploy", controlplane.StageDeploy{Environment: "canary0", Revision: rev.Number}, nil); code != 201 {
		b.Fatalf("deploy to canary: %d", code)
	}
	// canary0's Manager applies it and reports every proxy on the predicted revision.
	seq, err := store.Deliver(ctx, "canary0")
	if err != nil || len(seq) != 1 {
		b.Fatalf("deliver: %v %d", err, len(seq))
	}
	prediction := &protocol.PreviewResult{}
	for _, d := range ready {
		prediction.Proxies = append(prediction.Proxies, protocol.ProxyPreview{Namespace: d.Namespace, Name: d.Name, After: "g", Outcome: protocol.ProxyRolls})
	}
	p, _ := json.Marshal(prediction)
	must(store.Ack(ctx, "canary0", seq[0].ID, storage.CommandApplied, "", nil))
	must(store.SetCommandResult(ctx, seq[0].ID, string(p)))
	must(store.ReplaceInventory(ctx, "canary0", ready))
	must(store.SetSyncedSince(ctx, seq[0].ID, &time.Time{}))
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var rec storage.PromotionRecord
		if code := call("/admin/tenants/acme/projects/shop/stages/prod/promote", controlplane.StagePromote{Revision: rev.Number}, &rec); code != 201 || len(rec.Targets) != 100 {
			b.Fatalf("promote: %d, %d targets", code, len(rec.Targets))
		}
	}
}
