package manager

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/yaml"

	nexov1alpha1 "github.com/nexo-io/nexo-edge/api/v1alpha1"
	"github.com/nexo-io/nexo-edge/contract/connecttoken"
	"github.com/nexo-io/nexo-edge/contract/protocol"
	"github.com/nexo-io/nexo-edge/contract/signature"
	"github.com/nexo-io/nexo-edge/contract/wire"
)

// FuzzCommands decodes a Control Plane answer the way the Manager does (the heartbeat response
// body, then each command's manifests) and applies every command it holds against a fake
// cluster (a pure test: the fake client stands in for the API server; the Manager's behaviour
// against a real one is the agent and reliability suites'). Nothing panics; every outcome is
// applied or failed, and a failure says why; a deploy whose manifests are not all validly
// signed for this environment is never applied.
func FuzzCommands(f *testing.F) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	env := "0123456789ab"
	signed := func(rev int64) json.RawMessage {
		u := &unstructured.Unstructured{}
		_ = yaml.Unmarshal([]byte(`{apiVersion: nexo.io/v1alpha1, kind: NexoRateLimit, metadata: {name: rl, namespace: shop}, spec: {operationsPerSecond: 5}}`), &u.Object)
		if err := signature.Sign(u, priv, signature.Claims{Audience: env, Revision: rev}); err != nil {
			f.Fatal(err)
		}
		raw, _ := u.MarshalJSON()
		return raw
	}
	answer := func(cmds ...protocol.Command) []byte {
		raw, _ := json.Marshal(protocol.HeartbeatResponse{NextHeartbeatSeconds: 30, Commands: cmds})
		return raw
	}
	f.Add(answer(protocol.Command{ID: "1", Type: protocol.Deploy, Namespaces: []string{"shop"}, Manifests: []json.RawMessage{signed(3)}}))
	f.Add(answer(protocol.Command{ID: "2", Type: protocol.Deploy, Namespaces: []string{"shop"}, Manifests: []json.RawMessage{signed(1)}})) // older than the cluster's
	f.Add(answer(protocol.Command{ID: "3", Type: protocol.Deploy, Namespaces: []string{"other"}, Manifests: []json.RawMessage{signed(3)}}))
	f.Add(answer(protocol.Command{ID: "4", Type: protocol.Deploy, Namespaces: []string{"shop"}, Manifests: []json.RawMessage{json.RawMessage(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"x","namespace":"shop"}}`)}}))
	f.Add(answer(protocol.Command{ID: "5", Type: protocol.Rollout, Image: "registry.example.com/nexo/proxy:0.2.1"}))
	f.Add(answer(protocol.Command{ID: "6", Type: protocol.Rollout, Image: "registry.example.com/nexo/proxy:0.2.1", Proxy: &protocol.ObjectRef{Namespace: "shop", Name: "p"}}))
	f.Add(answer(protocol.Command{ID: "7", Type: protocol.Uninstall, Proxy: &protocol.ObjectRef{Namespace: "shop", Name: "p"}}))
	f.Add(answer(protocol.Command{ID: "8", Type: protocol.Uninstall}))
	f.Add(answer(protocol.Command{ID: "9", Type: protocol.Upgrade, TargetVersion: "9.9.9"}))
	f.Add(answer(protocol.Command{ID: "10", Type: protocol.WorkloadConfig}))
	f.Add(answer(protocol.Command{ID: "11", Type: "reboot"}))
	f.Add([]byte(`{"commands":[{"id":"x","type":"deploy","manifests":[null,1,"s",[],{}]}]}`))
	f.Add([]byte(`{"commands":null}`))
	f.Add([]byte(`not json`))

	dir := f.TempDir()
	tok, err := connecttoken.New(env)
	if err != nil {
		f.Fatal(err)
	}
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(tok), 0o600); err != nil {
		f.Fatal(err)
	}
	scheme := runtime.NewScheme()
	_ = nexov1alpha1.AddToScheme(scheme)
	_ = corev1.AddToScheme(scheme)

	f.Fuzz(func(t *testing.T, body []byte) {
		var resp protocol.HeartbeatResponse
		if err := json.Unmarshal(body, &resp); err != nil {
			return // post refuses it with the decoding error
		}
		// The cluster: a Manager-owned signed step at revision 2 and an owned proxy.
		existing := &unstructured.Unstructured{}
		_ = json.Unmarshal(signed(2), &existing.Object)
		existing.SetLabels(map[string]string{wire.OwnerLabel: "env-" + env, wire.ManagedByLabel: wire.ManagedByControlPlane})
		proxy := &nexov1alpha1.NexoProxy{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "shop", Labels: map[string]string{wire.OwnerLabel: "env-" + env}}}
		c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(existing, proxy).Build()
		a := NewAgent(Config{TokenFile: tokenFile, ControlPlaneURL: "http://cp.invalid", Namespace: "nexo-system",
			TrustedKeys: func() (map[string]ed25519.PublicKey, error) {
				return map[string]ed25519.PublicKey{signature.KeyID(pub): pub}, nil
			}, Log: logr.Discard()}, c, nil)
		for _, cmd := range resp.Commands {
			ack := a.apply(context.Background(), cmd) // not applySafely: a panic must fail the fuzzer
			switch ack.Status {
			case protocol.Applied:
				if cmd.Type == protocol.Deploy {
					for _, raw := range cmd.Manifests {
						u := &unstructured.Unstructured{}
						if err := u.UnmarshalJSON(raw); err != nil {
							t.Fatalf("a deploy with an undecodable manifest was applied: %s", ack.Message)
						}
						if _, err := signature.Verify(u, map[string]ed25519.PublicKey{signature.KeyID(pub): pub}, env); err != nil {
							t.Fatalf("a deploy with a manifest that does not verify (%v) was applied", err)
						}
					}
				}
			case protocol.Failed:
				if ack.Message == "" {
					t.Fatalf("command %q (%s) failed without saying why", cmd.ID, cmd.Type)
				}
			default:
				t.Fatalf("command %q (%s): outcome %q", cmd.ID, cmd.Type, ack.Status)
			}
		}
	})
}
