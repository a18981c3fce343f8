package controlplane_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nexo-io/nexo-edge/contract/protocol"
	"github.com/nexo-io/nexo-edge/controlplane"
)

// TestCommandTargetsFollowTheCluster: the environment view shows, per command and per proxy it
// carries, Synced, Progressing or Degraded from what the Manager's heartbeats report of that
// proxy (phase, Ready reason, desired and available revision). The Control Plane announces the
// capability the Manager waits for before it sends those fields, and a command to a lost
// environment is refused with the reason.
func TestCommandTargetsFollowTheCluster(t *testing.T) {
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	c := start(t, filepath.Join(t.TempDir(), "cp.db"), key)
	var env controlplane.NewEnvironment
	c.do("POST", "/admin/environments", admin, map[string]string{"name": "demo"}, &env)
	var resp protocol.HeartbeatResponse
	c.do("POST", "/v1/heartbeat", env.Token, heartbeat("cluster-a"), &resp)
	if !slices.Contains(resp.Capabilities, protocol.CapProxyStatus) {
		t.Fatalf("the heartbeat answer announces %v, want %s", resp.Capabilities, protocol.CapProxyStatus)
	}
	proxy := func(name string) json.RawMessage {
		return json.RawMessage(`{"apiVersion":"nexo.io/v1alpha1","kind":"NexoProxy","metadata":{"name":"` + name + `","namespace":"shop"},"spec":{"pipelineRef":{"name":"p"},"profileRef":{"name":"p"},"licenseRef":{"name":"l"},"upstream":{"name":"u","address":"m:27017"}}}`)
	}
	var created map[string]string
	if code := c.do("POST", "/admin/environments/"+env.ID+"/commands", admin,
		protocol.Command{Type: protocol.Deploy, Namespaces: []string{"shop"}, Manifests: []json.RawMessage{proxy("a"), proxy("b"), proxy("c")}}, &created); code != 201 {
		t.Fatalf("deploy: %d", code)
	}
	states := func() map[string]controlplane.CommandProxy {
		var v controlplane.EnvironmentView
		c.do("GET", "/admin/environments/"+env.ID, admin, nil, &v)
		out := map[string]controlplane.CommandProxy{}
		for _, cmd := range v.Commands {
			if cmd.ID == created["id"] {
				for _, tg := range cmd.Proxies {
					out[tg.Name] = tg
				}
			}
		}
		return out
	}
	if s := states(); len(s) != 3 || s["a"].State != controlplane.ProxyProgressing || s["a"].Reason != "CommandPending" {
		t.Fatalf("before delivery: %+v", s)
	}
	// Delivered, acknowledged, and the cluster reports: a Ready, b rolling out, c Degraded.
	c.do("POST", "/v1/heartbeat", env.Token, heartbeat("cluster-a"), &resp)
	if code := c.do("POST", "/v1/commands/"+created["id"]+"/ack", env.Token, protocol.Ack{Status: protocol.Applied}, nil); code != 204 {
		t.Fatalf("ack: %d", code)
	}
	hb := heartbeat("cluster-a")
	hb.Deployments = []protocol.Deployment{
		{Namespace: "shop", Name: "a", Replicas: 1, ReadyReplicas: 1, GraphRevision: "r2", AvailableRevision: "r2", Phase: "Ready", ReadyReason: "Ready"},
		{Namespace: "shop", Name: "b", Replicas: 1, ReadyReplicas: 1, GraphRevision: "r2", AvailableRevision: "r1", Phase: "Progressing", ReadyReason: "RollingOut"},
		{Namespace: "shop", Name: "c", GraphRevision: "", Phase: "Degraded", ReadyReason: "UnsupportedReference"},
	}
	if code := c.do("POST", "/v1/heartbeat", env.Token, hb, nil); code != 200 {
		t.Fatalf("heartbeat with proxy status: %d", code)
	}
	s := states()
	for name, want := range map[string][2]string{
		"a": {controlplane.ProxySynced, "Ready"},
		"b": {controlplane.ProxyProgressing, "RollingOut"},
		"c": {controlplane.ProxyDegraded, "UnsupportedReference"},
	} {
		if s[name].State != want[0] || s[name].Reason != want[1] {
			t.Errorf("%s: %+v, want %s/%s", name, s[name], want[0], want[1])
		}
	}

	// Lost: more than 10 intervals without a heartbeat. Nothing is queued.
	c.skew.Store(int64(11 * 30 * time.Second))
	var e protocol.Error
	if code := c.do("POST", "/admin/environments/"+env.ID+"/commands", admin,
		protocol.Command{Type: protocol.Deploy, Namespaces: []string{"shop"}, Manifests: []json.RawMessage{proxy("d")}}, &e); code != 409 ||
		!strings.Contains(e.Error, "is lost") || !strings.Contains(e.Error, "nothing was queued") {
		t.Errorf("deploy to a lost environment: %d %q", code, e.Error)
	}
	var v controlplane.EnvironmentView
	c.do("GET", "/admin/environments/"+env.ID, admin, nil, &v)
	if len(v.Commands) != 1 {
		t.Errorf("%d commands after the refusal, want 1", len(v.Commands))
	}
}
