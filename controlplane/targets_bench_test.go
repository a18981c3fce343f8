package controlplane_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

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
	store, err := controlplane.Open(filepath.Join(b.TempDir(), "cp.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = store.Close() })
	must := func(err error) {
		if err != nil {
			b.Fatal(err)
		}
	}
	must(store.CreateTenant(ctx, "acme", "acme"))
	must(store.CreateProject(ctx, "acme", "shop"))
	must(store.SetStage(ctx, "acme", controlplane.StoredStage{Stage: targeting.Stage{Project: "shop", Name: "prod",
		Environments: targeting.Selector{"env": "production"}, NamespaceTargets: targeting.Selector{"tier": "web"}}}))
	hb, _ := json.Marshal(protocol.Heartbeat{ProtocolVersion: protocol.Version, Limits: &protocol.Limits{Namespaces: []string{"*"}, ImageRepositories: []string{"*"}}})
	for i := range 1000 {
		id := fmt.Sprintf("env%04d", i)
		must(store.CreateEnvironment(ctx, id, id, "hash-"+id))
		must(store.AssignEnvironment(ctx, id, "acme"))
		env := map[bool]string{true: "production", false: "staging"}[i%2 == 0]
		must(store.SetEnvironmentLabels(ctx, id, map[string]string{"env": env, "team": "payments"}))
		must(store.RecordHeartbeat(ctx, id, string(hb)))
		for j := range 20 {
			tier := map[bool]string{true: "web", false: "data"}[j%2 == 0]
			must(store.SetNamespaceTarget(ctx, id, fmt.Sprintf("ns-%02d", j), map[string]string{"tier": tier}))
		}
	}
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	srv := httptest.NewServer((&controlplane.Server{Store: store, Key: key, AdminToken: admin, NextHeartbeat: time.Second, KeyEncryption: testKEK(key)}).Handler())
	b.Cleanup(srv.Close)
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
