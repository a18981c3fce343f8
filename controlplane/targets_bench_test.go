package controlplane_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/nexo-io/nexo-edge/controlplane/storage"
	"github.com/nexo-io/nexo-edge/test/framework/testcontrolplane"

	"github.com/nexo-io/nexo-edge/contract/protocol"
	"github.com/nexo-io/nexo-edge/controlplane"
	"github.com/nexo-io/nexo-edge/controlplane/targeting"
)

// BenchmarkTargetsQuery1000x20: the targets query of one stage through the server and its
// SQLite file (authentication, the tenant's 1,000 environments with their labels and last
// heartbeats, 20,000 namespace targets, the decisions, the JSON answer, the audit record),
// where half the environments and half their targets are eligible. The answer has a row per
// namespace target of the 500 selected environments and one per environment not selected.
func BenchmarkTargetsQuery1000x20(b *testing.B) {
	ctx := context.Background()
	cp, store, must := benchTenant(b)
	hb, _ := json.Marshal(protocol.Heartbeat{ProtocolVersion: protocol.Version, Limits: &protocol.Limits{Namespaces: []string{"*"}, ImageRepositories: []string{"*"}}})
	for i := range 1000 {
		id := fmt.Sprintf("env%04d", i)
		must(store.CreateEnvironment(ctx, id, id, "hash-"+id))
		must(store.AssignEnvironment(ctx, id, "acme"))
		env := map[bool]string{true: "production", false: "staging"}[i%2 == 0]
		must(store.SetEnvironmentLabels(ctx, id, map[string]string{"env": env, "team": "payments"}))
		must(store.RecordHeartbeat(ctx, id, string(hb), allCommands()))
		for j := range 20 {
			tier := map[bool]string{true: "web", false: "data"}[j%2 == 0]
			must(store.SetNamespaceTarget(ctx, id, fmt.Sprintf("ns-%02d", j), map[string]string{"tier": tier}))
		}
	}
	srv := cp
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		req, _ := http.NewRequest("GET", srv.URL+"/admin/tenants/acme/projects/shop/stages/prod/targets", nil)
		req.Header.Set("Authorization", "Bearer "+admin)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		var out struct{ Targets []targeting.Target }
		err = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || len(out.Targets) != 500*20+500 {
			b.Fatalf("%d, %d targets, %v", resp.StatusCode, len(out.Targets), err)
		}
	}
}

// BenchmarkStageDeploy: one deploy of a new NexoProxy through a stage, through the server and
// its SQLite file, in one transaction: authentication, the stage's targets over the tenant's
// 100 environments, decoding and checking the manifest, recording it as a revision, ownership,
// the entitlement count over the 2,000 proxies the environments report plus every deploy
// queued before it, the compatibility gate, signing, enqueueing and the audit record.
func BenchmarkStageDeploy(b *testing.B) {
	ctx := context.Background()
	cp, store, must := benchTenant(b)
	must(store.SetEntitlement(ctx, "acme", targeting.Entitlement{MaxProxies: 1 << 30, ExpiresAt: time.Now().Add(24 * time.Hour)}))
	beat := heartbeat("bench") // reports the promotion contract, so the compatibility gate runs in full
	beat.Limits = &protocol.Limits{Namespaces: []string{"*"}, ImageRepositories: []string{"*"}}
	hb, _ := json.Marshal(beat)
	for i := range 100 {
		id := fmt.Sprintf("env%03d", i)
		must(store.CreateEnvironment(ctx, id, id, "hash-"+id))
		must(store.AssignEnvironment(ctx, id, "acme"))
		must(store.SetEnvironmentLabels(ctx, id, map[string]string{"env": "production"}))
		must(store.RecordHeartbeat(ctx, id, string(hb), beat.Capabilities))
		must(store.SetNamespaceTarget(ctx, id, "web", map[string]string{"tier": "web"}))
		var proxies []protocol.Deployment
		for j := range 20 {
			proxies = append(proxies, protocol.Deployment{Namespace: "web", Name: fmt.Sprintf("p%02d", j), Replicas: 1})
		}
		must(store.ReplaceInventory(ctx, id, proxies))
	}
	srv := cp
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		body, _ := json.Marshal(controlplane.StageDeploy{Environment: "env000", Namespace: "web", Manifests: []json.RawMessage{proxyIn("web", fmt.Sprintf("new%06d", i))}})
		req, _ := http.NewRequest("POST", srv.URL+"/admin/tenants/acme/projects/shop/stages/prod/deploy", bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+admin)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 201 {
			b.Fatalf("deploy %d: %d", i, resp.StatusCode)
		}
	}
}

// benchTenant is a store with tenant acme, project shop and its stage prod (env=production,
// tier=web), and a must that fails the benchmark on an error.
func benchTenant(b *testing.B) (*testcontrolplane.ControlPlane, *storage.Store, func(error)) {
	ctx := context.Background()
	cp := testcontrolplane.StartT(b, testcontrolplane.Options{AdminToken: admin, NextHeartbeat: time.Second})
	store := cp.Store
	must := func(err error) {
		if err != nil {
			b.Fatal(err)
		}
	}
	must(store.CreateTenant(ctx, "acme", "acme"))
	must(store.CreateProject(ctx, "acme", "shop"))
	must(store.SetStage(ctx, "acme", storage.StoredStage{Stage: targeting.Stage{Project: "shop", Name: "prod",
		Environments: targeting.Selector{"env": "production"}, NamespaceTargets: targeting.Selector{"tier": "web"}}}))
	return cp, store, must
}
