package controlplane_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nexo-io/nexo-edge/controlplane/storage"
	"github.com/nexo-io/nexo-edge/test/framework/syncbuffer"
	"github.com/nexo-io/nexo-edge/test/framework/testcontrolplane"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/nexo-io/nexo-edge/catalog"
	"github.com/nexo-io/nexo-edge/contract/connecttoken"
	"github.com/nexo-io/nexo-edge/contract/protocol"
	"github.com/nexo-io/nexo-edge/contract/signature"
	"github.com/nexo-io/nexo-edge/controlplane"
)

const admin = "admin-secret"

type cp struct {
	t      *testing.T
	db     string
	store  *storage.Store
	srv    *testcontrolplane.ControlPlane
	pub    ed25519.PublicKey
	server *controlplane.Server
	// skew moves the server's clock forward (nanoseconds), for expiries and rate windows; clock,
	// when set, replaces it.
	skew  atomic.Int64
	clock atomic.Pointer[func() time.Time]
	// logs is what the server logged.
	logs *syncbuffer.Buffer
}

// start serves a Control Plane over the database db, signing with key, for the test.
func start(t *testing.T, db string, key ed25519.PrivateKey, opts ...func(*testcontrolplane.Options)) *cp {
	t.Helper()
	c := &cp{t: t, db: db, pub: key.Public().(ed25519.PublicKey), logs: &syncbuffer.Buffer{}}
	o := testcontrolplane.Options{DB: db, Key: key, AdminToken: admin, Log: slog.New(slog.NewTextHandler(c.logs, nil)),
		Now: func() time.Time {
			if clock := c.clock.Load(); clock != nil {
				return (*clock)()
			}
			return time.Now().Add(time.Duration(c.skew.Load()))
		}}
	for _, f := range opts {
		f(&o)
	}
	c.srv = testcontrolplane.StartT(t, o)
	c.store, c.server = c.srv.Store, c.srv.Server
	return c
}

// testKEK is the key-encryption key a test Control Plane derives from the signing key.
func testKEK(key ed25519.PrivateKey) controlplane.KeyEncrypter { return testcontrolplane.KEK(key) }

func (c *cp) stop() { c.srv.Stop() }

func (c *cp) do(method, path, token string, body any, out any) int {
	c.t.Helper()
	var rd io.Reader
	if body != nil {
		raw, _ := json.Marshal(body)
		rd = bytes.NewReader(raw)
	}
	req, _ := http.NewRequest(method, c.srv.URL+path, rd)
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	if out != nil {
		_ = json.NewDecoder(resp.Body).Decode(out)
	}
	return resp.StatusCode
}

// heartbeat is a Manager's heartbeat that advertises every command type of the table and
// reports the promotion contract as this build's Manager does (its installed kinds, the
// schema-only ones, the kinds each pipeline slot takes, the bundle and a fingerprint).
func heartbeat(cluster string) protocol.Heartbeat {
	hb := protocol.Heartbeat{ProtocolVersion: protocol.Version, ManagerVersion: catalog.BuildVersion, ClusterID: cluster,
		Capabilities: allCommands(), Cluster: protocol.Cluster{KubernetesVersion: "v1.37.2"},
		BundleVersion: catalog.BuildVersion, InstalledBy: "helm", SchemaFingerprint: "sha256:fixture", PipelineKinds: map[string][]string{}}
	for _, k := range catalog.Kinds {
		hb.InstalledKinds = append(hb.InstalledKinds, k.Kind)
		if k.Support == catalog.SchemaOnly {
			hb.SchemaOnlyKinds = append(hb.SchemaOnlyKinds, k.Kind)
		}
		for _, slot := range k.Slots {
			hb.PipelineKinds[string(slot)] = append(hb.PipelineKinds[string(slot)], k.Kind)
		}
	}
	hb.Capabilities = append(hb.Capabilities, protocol.CapBundleVersion, protocol.CapCRDKinds, protocol.CapSchemaFingerprint, protocol.CapPipelineKinds, protocol.CapPromotionContract)
	return hb
}

// legacyHeartbeat is a 0.2.0 Manager's: no promotion contract.
func legacyHeartbeat(cluster string) protocol.Heartbeat {
	return protocol.Heartbeat{ProtocolVersion: protocol.Version, ManagerVersion: "0.2.0", ClusterID: cluster,
		Capabilities: allCommands(), Cluster: protocol.Cluster{KubernetesVersion: "v1.37.2"}}
}

// allCommands are the heartbeat capability and those of every command type.
func allCommands() []string {
	caps := []string{protocol.CapHeartbeat}
	for _, c := range protocol.Commands {
		caps = append(caps, c.Capability)
	}
	return caps
}

func TestEnvironmentTokenAndBinding(t *testing.T) {
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	db := filepath.Join(t.TempDir(), "cp.db")
	c := start(t, db, key)

	var env controlplane.NewEnvironment
	if code := c.do("POST", "/admin/environments", admin, map[string]string{"name": "demo"}, &env); code != 201 {
		t.Fatalf("register: %d", code)
	}
	if id, err := connecttoken.Parse(env.Token); err != nil || id != env.ID {
		t.Fatalf("issued token %v (env %s)", err, env.ID)
	}
	if code := c.do("POST", "/admin/environments", "wrong", map[string]string{"name": "x"}, nil); code != 401 {
		t.Errorf("admin API without the admin token: %d", code)
	}

	var resp protocol.HeartbeatResponse
	if code := c.do("POST", "/v1/heartbeat", env.Token, heartbeat("cluster-a"), &resp); code != 200 || resp.NextHeartbeatSeconds != 30 {
		t.Fatalf("first heartbeat: %d %+v", code, resp)
	}
	if code := c.do("POST", "/v1/heartbeat", env.Token, heartbeat("cluster-b"), nil); code != 403 {
		t.Errorf("same token from another cluster: %d, want 403", code)
	}
	other, _ := connecttoken.New("someoneelse")
	if code := c.do("POST", "/v1/heartbeat", other, heartbeat("cluster-a"), nil); code != 401 {
		t.Errorf("unknown token: %d, want 401", code)
	}
	old := heartbeat("cluster-a")
	old.ProtocolVersion = "v0"
	var e protocol.Error
	if code := c.do("POST", "/v1/heartbeat", env.Token, old, &e); code != 400 || !strings.Contains(e.Error, "v1") {
		t.Errorf("old protocol: %d %q", code, e.Error)
	}

	// Only the token's hash is stored.
	c.stop()
	raw, _ := os.ReadFile(db)
	wal, _ := os.ReadFile(db + "-wal")
	if bytes.Contains(raw, []byte(env.Token)) || bytes.Contains(wal, []byte(env.Token)) {
		t.Fatal("the database holds the connect token")
	}
}

func TestCommandsSurviveARestartAndAreSigned(t *testing.T) {
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	db := filepath.Join(t.TempDir(), "cp.db")
	c := start(t, db, key)
	var env controlplane.NewEnvironment
	c.do("POST", "/admin/environments", admin, map[string]string{"name": "demo"}, &env)
	c.do("POST", "/v1/heartbeat", env.Token, heartbeat("cluster-a"), nil)

	proxy := json.RawMessage(`{"apiVersion":"nexo.io/v1alpha1","kind":"NexoRateLimit","metadata":{"name":"rl","namespace":"shop"},"spec":{"operationsPerSecond":5}}`)
	var created map[string]string
	if code := c.do("POST", "/admin/environments/"+env.ID+"/commands", admin,
		protocol.Command{Type: protocol.Deploy, Namespaces: []string{"shop"}, Manifests: []json.RawMessage{proxy}}, &created); code != 201 {
		t.Fatalf("enqueue deploy: %d", code)
	}
	var e protocol.Error
	cm := json.RawMessage(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","namespace":"shop"}}`)
	if code := c.do("POST", "/admin/environments/"+env.ID+"/commands", admin,
		protocol.Command{Type: protocol.Deploy, Namespaces: []string{"shop"}, Manifests: []json.RawMessage{cm}}, &e); code != 400 || !strings.Contains(e.Error, "only nexo.io kinds") {
		t.Errorf("non-nexo deploy: %d %q", code, e.Error)
	}
	if code := c.do("POST", "/admin/environments/"+env.ID+"/commands", admin,
		protocol.Command{Type: protocol.Deploy, Namespaces: []string{"other"}, Manifests: []json.RawMessage{proxy}}, &e); code != 400 {
		t.Errorf("deploy outside its namespaces: %d", code)
	}

	// Restart: a new server on the same database.
	c.stop()
	c = start(t, db, key)
	var resp protocol.HeartbeatResponse
	if code := c.do("POST", "/v1/heartbeat", env.Token, heartbeat("cluster-a"), &resp); code != 200 || len(resp.Commands) != 1 {
		t.Fatalf("heartbeat after restart: %d, %d commands", code, len(resp.Commands))
	}
	cmd := resp.Commands[0]
	if cmd.ID != created["id"] || cmd.Type != protocol.Deploy {
		t.Fatalf("command %+v", cmd)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(cmd.Manifests[0]); err != nil {
		t.Fatal(err)
	}
	signed, err := signature.Verify(u, map[string]ed25519.PublicKey{signature.KeyID(c.pub): c.pub}, env.ID)
	if err != nil {
		t.Fatalf("deploy manifest not signed by the Control Plane key for its environment: %v", err)
	}
	if signed.Revision < 1 {
		t.Errorf("signature revision %d, want the command's sequence number (at least 1)", signed.Revision)
	}
	// Unacknowledged commands are delivered again.
	c.do("POST", "/v1/heartbeat", env.Token, heartbeat("cluster-a"), &resp)
	if len(resp.Commands) != 1 {
		t.Errorf("unacknowledged command not redelivered")
	}
	for i := 0; i < 2; i++ { // acknowledging twice is harmless
		if code := c.do("POST", "/v1/commands/"+cmd.ID+"/ack", env.Token, protocol.Ack{Status: protocol.Applied, Message: "ok"}, nil); code != 204 {
			t.Errorf("ack %d: %d", i, code)
		}
	}
	c.do("POST", "/v1/heartbeat", env.Token, heartbeat("cluster-a"), &resp)
	if len(resp.Commands) != 0 {
		t.Errorf("acknowledged command delivered again")
	}
	var view controlplane.EnvironmentView
	c.do("GET", "/admin/environments/"+env.ID, admin, nil, &view)
	if len(view.Commands) != 1 || view.Commands[0].Status != protocol.Applied || view.Inventory == nil || view.Inventory.ClusterID != "cluster-a" {
		t.Errorf("environment view %+v", view)
	}
	if code := c.do("POST", "/v1/commands/cmd-unknown/ack", env.Token, protocol.Ack{Status: protocol.Applied}, nil); code != 404 {
		t.Errorf("ack of an unknown command: %d", code)
	}
}

// A command whose capability the environment's Manager did not advertise is refused (409,
// audited, naming the capability) before anything is queued; the advertised one is accepted.
func TestUnadvertisedCommandIsRefusedBeforeQueueing(t *testing.T) {
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	c := start(t, filepath.Join(t.TempDir(), "cp.db"), key)
	var env controlplane.NewEnvironment
	c.do("POST", "/admin/environments", admin, map[string]string{"name": "older"}, &env)
	hb := heartbeat("cluster-a")
	hb.ManagerVersion = "0.1.9"
	hb.Capabilities = []string{protocol.CapHeartbeat, protocol.CapUpgrade}
	if code := c.do("POST", "/v1/heartbeat", env.Token, hb, nil); code != 200 {
		t.Fatalf("heartbeat: %d", code)
	}
	proxy := map[string]string{"namespace": "shop", "name": "orders"}
	var e protocol.Error
	code := c.do("POST", "/admin/environments/"+env.ID+"/commands", admin, map[string]any{"type": "uninstall", "proxy": proxy}, &e)
	if code != 409 || !strings.Contains(e.Error, protocol.CapUninstall) || !strings.Contains(e.Error, "0.1.9") {
		t.Fatalf("uninstall to a Manager without %s: %d %q", protocol.CapUninstall, code, e.Error)
	}
	var view controlplane.EnvironmentView
	c.do("GET", "/admin/environments/"+env.ID, admin, nil, &view)
	if len(view.Commands) != 0 {
		t.Fatalf("a refused command was queued: %+v", view.Commands)
	}
	var page controlplane.AuditPage
	c.do("GET", "/admin/audit?action=command.queue", admin, nil, &page)
	if n := len(page.Records); n != 1 || page.Records[0].Decision != storage.Refused || !strings.Contains(page.Records[0].Reason, protocol.CapUninstall) {
		t.Fatalf("the refusal's audit record: %+v", page.Records)
	}
	// The advertised type is queued; and once the Manager advertises uninstall, so is that.
	if code := c.do("POST", "/admin/environments/"+env.ID+"/commands", admin, map[string]any{"type": "upgrade", "targetVersion": "0.3.0"}, nil); code != 201 {
		t.Fatalf("an advertised upgrade: %d", code)
	}
	hb.Capabilities = append(hb.Capabilities, protocol.CapUninstall)
	c.do("POST", "/v1/heartbeat", env.Token, hb, nil)
	if code := c.do("POST", "/admin/environments/"+env.ID+"/commands", admin, map[string]any{"type": "uninstall", "proxy": proxy}, nil); code != 201 {
		t.Fatalf("uninstall once advertised: %d", code)
	}
}
