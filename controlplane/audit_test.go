package controlplane_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nexo-io/nexo-edge/controlplane/storage"

	"github.com/nexo-io/nexo-edge/contract/protocol"
	"github.com/nexo-io/nexo-edge/controlplane"
)

// The audit history against the real server and its SQLite file: every action and decision is
// recorded (allowed, refused, unknown caller), each delivery and acknowledgement with its
// command id; filters and the cursor select them; no token or manifest appears; the database
// refuses to change or delete a record; verify walks the chain, and names the first record an
// edit or a removal made directly in SQLite broke.
func TestAuditHistory(t *testing.T) {
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	db := filepath.Join(t.TempDir(), "cp.db")
	c := start(t, db, key)
	var env controlplane.NewEnvironment
	c.do("POST", "/admin/environments", admin, map[string]string{"name": "audited"}, &env)
	if code := c.do("POST", "/admin/environments", "a-guess", map[string]string{"name": "x"}, nil); code != 401 {
		t.Fatalf("bad admin token: %d", code)
	}
	c.do("POST", "/v1/heartbeat", env.Token, heartbeat("cluster-a"), nil)
	manifest := json.RawMessage(`{"apiVersion":"nexo.io/v1alpha1","kind":"NexoRateLimit","metadata":{"name":"rl-secret-shape","namespace":"shop"},"spec":{"operationsPerSecond":5}}`)
	var created map[string]string
	c.do("POST", "/admin/environments/"+env.ID+"/commands", admin, protocol.Command{Type: protocol.Deploy, Namespaces: []string{"shop"}, Manifests: []json.RawMessage{manifest}}, &created)
	c.do("POST", "/admin/environments/"+env.ID+"/commands", admin, protocol.Command{Type: protocol.Deploy, Namespaces: []string{"other"}, Manifests: []json.RawMessage{manifest}}, nil)
	var resp protocol.HeartbeatResponse
	c.do("POST", "/v1/heartbeat", env.Token, heartbeat("cluster-a"), &resp)
	c.do("POST", "/v1/commands/"+created["id"]+"/ack", env.Token, protocol.Ack{Status: protocol.Applied}, nil)
	c.do("GET", "/admin/environments/"+env.ID, admin, nil, nil) // a read: not an action

	var all controlplane.AuditPage
	c.do("GET", "/admin/audit", admin, nil, &all)
	var got []string
	for _, r := range all.Records {
		got = append(got, fmt.Sprintf("%s %s %s %s %s", r.Actor, r.Action, r.Decision, r.Target, r.CommandID))
	}
	want := []string{
		"admin environment.create allowed " + env.ID + " ",
		"unknown environment.create refused  ",
		"admin command.queue allowed " + env.ID + " " + created["id"],
		"admin command.queue refused " + env.ID + " ",
		"manager:" + env.ID + " command.deliver allowed " + env.ID + " " + created["id"],
		"manager:" + env.ID + " command.ack allowed " + env.ID + " " + created["id"],
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("audit records:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if r := all.Records[3]; !strings.Contains(r.Reason, "other") || r.Role != "admin" {
		t.Errorf("the refused deploy's record: %+v", r)
	}
	if r := all.Records[1]; !strings.Contains(r.Reason, "token is required") || r.Role != "none" || r.Tenant != "" {
		t.Errorf("the unknown caller's record: %+v", r)
	}
	raw, _ := json.Marshal(all)
	for _, secret := range []string{env.Token, admin, "a-guess", "operationsPerSecond", `"spec"`} {
		if strings.Contains(string(raw), secret) {
			t.Errorf("the audit history holds %q", secret)
		}
	}
	// Filters and the cursor.
	var page controlplane.AuditPage
	c.do("GET", "/admin/audit?decision=refused", admin, nil, &page)
	if len(page.Records) != 2 {
		t.Errorf("refused: %+v", page.Records)
	}
	c.do("GET", "/admin/audit?command="+created["id"], admin, nil, &page)
	if len(page.Records) != 3 {
		t.Errorf("by command: %+v", page.Records)
	}
	var seen []int64
	for after := int64(0); ; {
		var p controlplane.AuditPage
		c.do("GET", fmt.Sprintf("/admin/audit?limit=4&after=%d", after), admin, nil, &p)
		for _, r := range p.Records {
			seen = append(seen, r.Seq)
		}
		if p.Next == 0 {
			break
		}
		after = p.Next
	}
	if len(seen) != len(all.Records)+0 || seen[0] != 1 {
		t.Errorf("paged seqs %v, want the %d records", seen, len(all.Records))
	}
	var e protocol.Error
	if code := c.do("GET", "/admin/audit?limit=0", admin, nil, &e); code != 400 || !strings.Contains(e.Error, "limit") {
		t.Errorf("limit=0: %d %q", code, e.Error)
	}
	var v storage.AuditVerification
	c.do("GET", "/admin/audit/verify", admin, nil, &v)
	if !v.OK || v.Records < int64(len(all.Records)) || v.Head == "" {
		t.Fatalf("verify: %+v", v)
	}

	// Directly in SQLite: the database refuses to change or delete a record.
	sqldb, err := sql.Open("sqlite", "file:"+db+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer sqldb.Close()
	for _, stmt := range []string{`UPDATE audit SET decision='allowed' WHERE seq=2`, `DELETE FROM audit WHERE seq=2`} {
		if _, err := sqldb.Exec(stmt); err == nil || !strings.Contains(err.Error(), "append-only") {
			t.Errorf("%s: %v", stmt, err)
		}
	}
	// Someone who drops the triggers and edits record 2 is found out at record 2.
	if _, err := sqldb.Exec(`DROP TRIGGER audit_no_update; UPDATE audit SET decision='allowed', reason='' WHERE seq=2`); err != nil {
		t.Fatal(err)
	}
	c.do("GET", "/admin/audit/verify", admin, nil, &v)
	if v.OK || v.BrokenAt != 2 || !strings.Contains(v.Reason, "changed after it was written") {
		t.Errorf("after an edit: %+v", v)
	}
	// Rewriting its hash too: record 2 now verifies alone, but record 3 no longer chains to it.
	var r2 storage.AuditRecord
	if err := sqldb.QueryRow(`SELECT seq, actor, role, action, target, decision, reason, command_id, prev_hash FROM audit WHERE seq=2`).
		Scan(&r2.Seq, &r2.Actor, &r2.Role, &r2.Action, &r2.Target, &r2.Decision, &r2.Reason, &r2.CommandID, &r2.PrevHash); err != nil {
		t.Fatal(err)
	}
	if _, err := sqldb.Exec(`UPDATE audit SET hash='forged' WHERE seq=2`); err != nil {
		t.Fatal(err)
	}
	c.do("GET", "/admin/audit/verify", admin, nil, &v)
	if v.OK || v.BrokenAt != 2 {
		t.Errorf("after a hash rewrite: %+v", v)
	}

	// A record removed from the middle of a chain is named by the record after the gap.
	other := filepath.Join(t.TempDir(), "other.db")
	store2, err := storage.Open(other)
	if err != nil {
		t.Fatal(err)
	}
	defer store2.Close()
	for i := 0; i < 5; i++ {
		if _, err := store2.Audit(context.Background(), storage.AuditRecord{Actor: "a", Role: "admin", Action: "x", Decision: storage.Allowed}); err != nil {
			t.Fatal(err)
		}
	}
	if v, _ := store2.VerifyAudit(context.Background()); !v.OK || v.Records != 5 {
		t.Fatalf("a fresh chain: %+v", v)
	}
	db2, err := sql.Open("sqlite", "file:"+other+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db2.Close()
	if _, err := db2.Exec(`DROP TRIGGER audit_no_delete; DELETE FROM audit WHERE seq=3`); err != nil {
		t.Fatal(err)
	}
	if v, _ := store2.VerifyAudit(context.Background()); v.OK || v.BrokenAt != 4 || !strings.Contains(v.Reason, "removed") {
		t.Errorf("after a removal: %+v", v)
	}
}
