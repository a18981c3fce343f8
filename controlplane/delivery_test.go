package controlplane_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nexo-io/nexo-edge/controlplane/storage"
	"github.com/nexo-io/nexo-edge/test/framework/testcontrolplane"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/nexo-io/nexo-edge/catalog"
	"github.com/nexo-io/nexo-edge/contract/protocol"
	"github.com/nexo-io/nexo-edge/contract/signature"
	"github.com/nexo-io/nexo-edge/controlplane"
)

func newEnv(t *testing.T) (*cp, controlplane.NewEnvironment) {
	t.Helper()
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	c := start(t, filepath.Join(t.TempDir(), "cp.db"), key)
	var env controlplane.NewEnvironment
	if code := c.do("POST", "/admin/environments", admin, map[string]string{"name": "t"}, &env); code != 201 {
		t.Fatalf("register: %d", code)
	}
	return c, env
}

func proxyManifest(name string) json.RawMessage {
	raw, _ := json.Marshal(map[string]any{"apiVersion": "nexo.io/v1alpha1", "kind": "NexoProxy",
		"metadata": map[string]any{"name": name, "namespace": "shop"},
		"spec": map[string]any{"pipelineRef": map[string]any{"name": "p"}, "profileRef": map[string]any{"name": "s"},
			"licenseRef": map[string]any{"name": "l"}, "upstream": map[string]any{"name": "primary", "address": "mongo:27017"}}})
	return raw
}

func (c *cp) enqueue(env controlplane.NewEnvironment, cmd protocol.Command) string {
	c.t.Helper()
	var res map[string]string
	if code := c.do("POST", "/admin/environments/"+env.ID+"/commands", admin, cmd, &res); code != 201 {
		c.t.Fatalf("enqueue %s: %d", cmd.Type, code)
	}
	return res["id"]
}

func (c *cp) deliver(env controlplane.NewEnvironment) []protocol.Command {
	c.t.Helper()
	var resp protocol.HeartbeatResponse
	if code := c.do("POST", "/v1/heartbeat", env.Token, heartbeat("cluster-a"), &resp); code != 200 {
		c.t.Fatalf("heartbeat: %d", code)
	}
	return resp.Commands
}

// TestCommandsAreOrderedAndSignedBySequence: twelve commands queued within the same clock tick
// come back in queueing order (an integer sequence, not a timestamp), and each deploy's
// manifests are signed for the environment with the command's sequence as their revision, so
// later commands carry higher revisions.
func TestCommandsAreOrderedAndSignedBySequence(t *testing.T) {
	c, env := newEnv(t)
	var ids []string
	for i := 0; i < 12; i++ {
		ids = append(ids, c.enqueue(env, protocol.Command{Type: protocol.Deploy, Namespaces: []string{"shop"}, Manifests: []json.RawMessage{proxyManifest("p")}}))
	}
	got := c.deliver(env)
	if len(got) != len(ids) {
		t.Fatalf("%d commands delivered, want %d", len(got), len(ids))
	}
	last := int64(0)
	for i, cmd := range got {
		if cmd.ID != ids[i] {
			t.Fatalf("command %d is %s, want %s (queueing order)", i, cmd.ID, ids[i])
		}
		u := &unstructured.Unstructured{}
		_ = u.UnmarshalJSON(cmd.Manifests[0])
		s, err := signature.Verify(u, map[string]ed25519.PublicKey{signature.KeyID(c.pub): c.pub}, env.ID)
		if err != nil {
			t.Fatal(err)
		}
		if s.Revision <= last {
			t.Fatalf("command %d has revision %d after %d", i, s.Revision, last)
		}
		last = s.Revision
	}
}

// TestUnacknowledgedCommandIsDeadLettered: a command that is delivered but never acknowledged
// (it crashes the Manager, say) is delivered MaxDeliveries times, then shown as dead and no
// longer delivered; the next command is not held up behind it.
func TestUnacknowledgedCommandIsDeadLettered(t *testing.T) {
	c, env := newEnv(t)
	poison := c.enqueue(env, protocol.Command{Type: protocol.Upgrade, TargetVersion: "9.9.9"})
	for i := 0; i < storage.MaxDeliveries; i++ {
		if got := c.deliver(env); len(got) != 1 || got[0].ID != poison {
			t.Fatalf("delivery %d: %+v", i+1, got)
		}
	}
	next := c.enqueue(env, protocol.Command{Type: protocol.Upgrade, TargetVersion: "0.2.0"})
	got := c.deliver(env)
	if len(got) != 1 || got[0].ID != next {
		t.Fatalf("after %d deliveries the poison command is still delivered: %+v", storage.MaxDeliveries, got)
	}
	var view controlplane.EnvironmentView
	c.do("GET", "/admin/environments/"+env.ID, admin, nil, &view)
	if view.Commands[0].Status != "dead" || view.Commands[0].Deliveries != storage.MaxDeliveries || !strings.Contains(view.Commands[0].Message, "not acknowledged") {
		t.Fatalf("poison command %+v", view.Commands[0])
	}
	// A late acknowledgement still records the real outcome.
	if code := c.do("POST", "/v1/commands/"+poison+"/ack", env.Token, protocol.Ack{Status: protocol.Failed, Message: "late"}, nil); code != 204 {
		t.Fatalf("late ack: %d", code)
	}
}

// TestRolloutAfterUninstallDoesNotRecreate: the environment's deployed set is the truth. After
// an uninstall of one proxy is queued, a rollout re-signs only the proxies still deployed, so it
// can never bring the uninstalled one back; naming it explicitly is refused.
func TestRolloutAfterUninstallDoesNotRecreate(t *testing.T) {
	c, env := newEnv(t)
	deploy := c.enqueue(env, protocol.Command{Type: protocol.Deploy, Namespaces: []string{"shop"}, Manifests: []json.RawMessage{proxyManifest("keep"), proxyManifest("gone")}})
	c.deliver(env)
	c.do("POST", "/v1/commands/"+deploy+"/ack", env.Token, protocol.Ack{Status: protocol.Applied}, nil)
	c.enqueue(env, protocol.Command{Type: protocol.Uninstall, Proxy: &protocol.ObjectRef{Namespace: "shop", Name: "gone"}})
	rollout := c.enqueue(env, protocol.Command{Type: protocol.Rollout, Image: "registry.example.com/nexo/proxy:0.3.0"})
	var names []string
	for _, cmd := range c.deliver(env) {
		if cmd.ID != rollout {
			continue
		}
		for _, raw := range cmd.Manifests {
			u := &unstructured.Unstructured{}
			_ = u.UnmarshalJSON(raw)
			names = append(names, u.GetName())
		}
	}
	if len(names) != 1 || names[0] != "keep" {
		t.Fatalf("rollout re-signed %v, want only [keep]", names)
	}
	var e protocol.Error
	if code := c.do("POST", "/admin/environments/"+env.ID+"/commands", admin,
		protocol.Command{Type: protocol.Rollout, Image: "r/x:1", Proxy: &protocol.ObjectRef{Namespace: "shop", Name: "gone"}}, &e); code != 400 || !strings.Contains(e.Error, "not deployed") {
		t.Errorf("rollout of the uninstalled proxy: %d %q", code, e.Error)
	}
}

// TestAdminRequestBodiesAreBounded: the admin API refuses an oversized body instead of reading it.
func TestAdminRequestBodiesAreBounded(t *testing.T) {
	c, _ := newEnv(t)
	body := append([]byte(`{"name":"`), bytes.Repeat([]byte("x"), 2<<20)...)
	req, _ := http.NewRequest("POST", c.srv.URL+"/admin/environments", bytes.NewReader(append(body, '"', '}')))
	req.Header.Set("Authorization", "Bearer "+admin)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("2 MiB environment name: %d, want 413", resp.StatusCode)
	}
	srv := controlplane.NewHTTPServer("127.0.0.1:0", http.NotFoundHandler())
	if srv.ReadTimeout == 0 || srv.WriteTimeout == 0 || srv.IdleTimeout == 0 || srv.ReadHeaderTimeout == 0 {
		t.Errorf("server timeouts %+v", srv)
	}
}

// TestLegacyWorkloadConfigurationIsNotQueued: the reference Control Plane refuses to queue it,
// with the same advice.
func TestLegacyWorkloadConfigurationIsNotQueued(t *testing.T) {
	c, env := newEnv(t)
	var e protocol.Error
	if code := c.do("POST", "/admin/environments/"+env.ID+"/commands", admin, protocol.Command{Type: protocol.WorkloadConfig}, &e); code != 400 || !strings.Contains(e.Error, "nexo.io objects") {
		t.Fatalf("queueing legacy workload configuration: %d %q", code, e.Error)
	}
}

// TestHeartbeatAgeAndState: the admin API shows each environment's last heartbeat, its age and a
// state: never, healthy (at most 3 heartbeat intervals old), stale (up to 10), lost (beyond).
func TestHeartbeatAgeAndState(t *testing.T) {
	c, env := newEnv(t)
	now := time.Now()
	clock := func() time.Time { return now }
	c.clock.Store(&clock)
	state := func() (string, int64) {
		var list []controlplane.EnvironmentSummary
		if code := c.do("GET", "/admin/environments", admin, nil, &list); code != 200 || len(list) != 1 {
			t.Fatalf("listing: %d %+v", code, list)
		}
		age := int64(-1)
		if list[0].AgeSeconds != nil {
			age = *list[0].AgeSeconds
		}
		return list[0].State, age
	}
	if s, _ := state(); s != controlplane.StateNever {
		t.Fatalf("before any heartbeat: %s", s)
	}
	c.deliver(env) // a heartbeat; the default interval is 30 s
	for _, step := range []struct {
		after time.Duration
		want  string
	}{{0, controlplane.StateHealthy}, {89 * time.Second, controlplane.StateHealthy}, {91 * time.Second, controlplane.StateStale}, {301 * time.Second, controlplane.StateLost}} {
		now = time.Now().Add(step.after)
		if s, age := state(); s != step.want || age < int64(step.after.Seconds())-1 {
			t.Errorf("%s after the heartbeat: state %s, age %d s; want %s", step.after, s, age, step.want)
		}
	}
	var view controlplane.EnvironmentView
	c.do("GET", "/admin/environments/"+env.ID, admin, nil, &view)
	if view.State != controlplane.StateLost || view.LastHeartbeat == nil {
		t.Errorf("environment view health %+v", view.Health)
	}
}

// TestTokenRotationGrace: after a rotation the old token works until the Manager uses the new
// one, or until the grace deadline; then it gets 401 saying it was rotated.
func TestTokenRotationGrace(t *testing.T) {
	c, env := newEnv(t)
	now := time.Now()
	clock := func() time.Time { return now }
	c.clock.Store(&clock)
	hb := func(tok string) (int, string) {
		var e protocol.Error
		code := c.do("POST", "/v1/heartbeat", tok, heartbeat("cluster-a"), &e)
		return code, e.Error
	}
	if code, _ := hb(env.Token); code != 200 {
		t.Fatalf("first heartbeat %d", code)
	}
	var r1 controlplane.RotatedToken
	if code := c.do("POST", "/admin/environments/"+env.ID+"/token", "not-admin", map[string]int{"graceSeconds": 3600}, nil); code != 401 {
		t.Fatalf("rotation without the admin token: %d", code)
	}
	if code := c.do("POST", "/admin/environments/"+env.ID+"/token", admin, map[string]int{"graceSeconds": 3600}, &r1); code != 200 {
		t.Fatalf("rotate: %d", code)
	}
	if code, _ := hb(env.Token); code != 200 {
		t.Fatalf("old token during the grace period: %d", code)
	}
	if code, _ := hb(r1.Token); code != 200 {
		t.Fatalf("new token: %d", code)
	}
	if code, msg := hb(env.Token); code != 401 || !strings.Contains(msg, "rotated") {
		t.Fatalf("old token after the new one was used: %d %q", code, msg)
	}
	// A second rotation whose new token is never used: the old one ends at the deadline.
	var r2 controlplane.RotatedToken
	c.do("POST", "/admin/environments/"+env.ID+"/token", admin, map[string]int{"graceSeconds": 3600}, &r2)
	now = now.Add(59 * time.Minute)
	if code, _ := hb(r1.Token); code != 200 {
		t.Fatalf("previous token before its deadline: %d", code)
	}
	now = now.Add(2 * time.Minute)
	if code, msg := hb(r1.Token); code != 401 || !strings.Contains(msg, "rotated") {
		t.Fatalf("previous token after its deadline: %d %q", code, msg)
	}
	if code, _ := hb(r2.Token); code != 200 {
		t.Fatalf("current token: %d", code)
	}
}

// TestInstallCommand: the Control Plane supplies the environment's install command, pinned to
// this version, naming its URL and environment, never the token; without a public URL it says so.
func TestInstallCommand(t *testing.T) {
	c, env := newEnv(t)
	var e protocol.Error
	if code := c.do("GET", "/admin/environments/"+env.ID+"/install", admin, nil, &e); code != 409 || !strings.Contains(e.Error, "public URL") {
		t.Fatalf("without a public URL: %d %q", code, e.Error)
	}
	if err := c.srv.Reconfigure(func(o *testcontrolplane.Options) { o.PublicURL = "https://cp.example.com" }); err != nil {
		t.Fatal(err)
	}
	var ic controlplane.InstallCommand
	if code := c.do("GET", "/admin/environments/"+env.ID+"/install", admin, nil, &ic); code != 200 {
		t.Fatalf("install command: %d", code)
	}
	// The environment id goes as a string: an id of digits would be a number to --set.
	for _, want := range []string{"--version " + catalog.BuildVersion, "--token-file ./connect-token", "--control-plane-url https://cp.example.com", "--set-string environmentID=" + env.ID} {
		if !strings.Contains(ic.Nexoctl, want) {
			t.Errorf("nexoctl command %q lacks %q", ic.Nexoctl, want)
		}
	}
	// Every path is pinned to this version: the released chart, the release's kustomize entry
	// point (releases/<version>, never changed once released), the starting CSV (below).
	for _, want := range []string{catalog.ChartReference + " --version " + catalog.BuildVersion, "--set-string environmentID=" + env.ID, "manager.controlPlaneURL=https://cp.example.com"} {
		if !strings.Contains(ic.Helm, want) {
			t.Errorf("helm command %q lacks %q", ic.Helm, want)
		}
	}
	kustomize := strings.Join(ic.Kustomize, "\n")
	for _, want := range []string{"-k '" + catalog.SourceRepository + "//releases/" + catalog.BuildVersion + "'", "create configmap nexo-manager-config --from-literal=controlPlaneURL=https://cp.example.com --from-literal=environmentID=" + env.ID,
		"create secret generic nexo-connect-token --from-file=token=./connect-token"} {
		if !strings.Contains(kustomize, want) {
			t.Errorf("kustomize commands %q lack %q", kustomize, want)
		}
	}
	sub := &struct {
		Spec struct {
			StartingCSV string `json:"startingCSV"`
			Config      struct {
				Env []struct{ Name, Value string } `json:"env"`
			} `json:"config"`
		} `json:"spec"`
	}{}
	if err := yaml.Unmarshal([]byte(ic.OLMSubscription), sub); err != nil {
		t.Fatal(err)
	}
	env2 := map[string]string{}
	for _, e := range sub.Spec.Config.Env {
		env2[e.Name] = e.Value
	}
	if env2["NEXO_CONTROL_PLANE_URL"] != "https://cp.example.com" || env2["NEXO_ENVIRONMENT_ID"] != env.ID || sub.Spec.StartingCSV != "nexo-operator.v"+catalog.BuildVersion {
		t.Errorf("OLM Subscription %s", ic.OLMSubscription)
	}
	all, _ := json.Marshal(ic)
	if strings.Contains(string(all), env.Token) {
		t.Fatal("the install command contains the connect token")
	}
}
