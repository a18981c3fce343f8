package controlplane_test

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/nexo-io/nexo-edge/contract/protocol"
	"github.com/nexo-io/nexo-edge/controlplane"
	"github.com/nexo-io/nexo-edge/test/framework/testcontrolplane"
)

// FuzzRequests sends arbitrary bodies to every endpoint that decodes one (the Manager's
// heartbeat and ack, the admin API's environment, command and token requests): never a panic,
// never a 500, and every refusal carries exactly one error body.
func FuzzRequests(f *testing.F) {
	cp := testcontrolplane.StartT(f, testcontrolplane.Options{AdminToken: "fuzz-admin", PublicURL: "http://127.0.0.1:1"})
	h := cp.Server.Handler()
	do := func(method, path, token string, body []byte) *httptest.ResponseRecorder {
		req := httptest.NewRequest(method, path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	rec := do("POST", "/admin/environments", "fuzz-admin", []byte(`{"name":"fuzz"}`))
	var env controlplane.NewEnvironment
	if err := json.Unmarshal(rec.Body.Bytes(), &env); err != nil || env.Token == "" {
		f.Fatalf("register: %d %s", rec.Code, rec.Body)
	}
	hb, _ := json.Marshal(protocol.Heartbeat{ProtocolVersion: protocol.Version, ClusterID: "c1"})
	f.Add(hb)
	f.Add([]byte(`{"type":"deploy","namespaces":["shop"],"manifests":[{"apiVersion":"nexo.io/v1alpha1","kind":"NexoRateLimit","metadata":{"name":"x","namespace":"shop"}}]}`))
	f.Add([]byte(`{"type":"rollout","image":"x"}`))
	f.Add([]byte(`{"status":"applied","message":"ok"}`))
	f.Add([]byte(`{"graceSeconds":-1}`))
	f.Add([]byte(`{`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, r := range []struct{ method, path, token string }{
			{"POST", "/v1/heartbeat", env.Token},
			{"POST", "/v1/commands/does-not-exist/ack", env.Token},
			{"POST", "/admin/environments", "fuzz-admin"},
			{"POST", "/admin/environments/" + env.ID + "/commands", "fuzz-admin"},
		} {
			rec := do(r.method, r.path, r.token, body)
			if rec.Code >= 500 {
				t.Fatalf("%s %s: %d %s for body %q", r.method, r.path, rec.Code, rec.Body, body)
			}
			if rec.Code >= 400 {
				// Exactly one error body: one JSON value with a message, nothing after it.
				dec := json.NewDecoder(bytes.NewReader(rec.Body.Bytes()))
				var e protocol.Error
				if dec.Decode(&e) != nil || e.Error == "" || dec.More() {
					t.Fatalf("%s %s: %d without exactly one error message: %q", r.method, r.path, rec.Code, rec.Body)
				}
			}
		}
	})
}
