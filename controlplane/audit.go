// The audit history (docs/controlplane.md, "Audit"): every admin action and every decision,
// allowed or refused, every command's delivery and its Manager's acknowledgement, one row each
// in an append-only table the database itself refuses to update or delete, each row chained to
// the one before by a sha256 hash. A row holds who, in what role, did what to what, the decision
// and its reason and the command id: never a token or a manifest body.

package controlplane

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

const auditSchema = `
CREATE TABLE IF NOT EXISTS audit (
  seq INTEGER PRIMARY KEY AUTOINCREMENT, at TEXT NOT NULL, tenant TEXT NOT NULL DEFAULT '',
  actor TEXT NOT NULL, role TEXT NOT NULL, action TEXT NOT NULL, target TEXT NOT NULL,
  decision TEXT NOT NULL, reason TEXT NOT NULL, command_id TEXT NOT NULL,
  prev_hash TEXT NOT NULL, hash TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS audit_actor ON audit(actor, seq);
CREATE INDEX IF NOT EXISTS audit_action ON audit(action, seq);
CREATE INDEX IF NOT EXISTS audit_target ON audit(target, seq);
CREATE INDEX IF NOT EXISTS audit_command ON audit(command_id, seq);
CREATE INDEX IF NOT EXISTS audit_tenant ON audit(tenant, seq);
CREATE TRIGGER IF NOT EXISTS audit_no_update BEFORE UPDATE ON audit
  BEGIN SELECT RAISE(ABORT, 'the audit history is append-only: records cannot be changed'); END;
CREATE TRIGGER IF NOT EXISTS audit_no_delete BEFORE DELETE ON audit
  BEGIN SELECT RAISE(ABORT, 'the audit history is append-only: records cannot be deleted'); END;
`

// Decisions an audit record carries.
const (
	Allowed = "allowed"
	Refused = "refused"
)

// AuditRecord is one row of the audit history.
type AuditRecord struct {
	Seq int64     `json:"seq"`
	At  time.Time `json:"at"`
	// Tenant is the tenant the action was in ("" for the platform's own actions).
	Tenant    string `json:"tenant,omitempty"`
	Actor     string `json:"actor"`
	Role      string `json:"role"`
	Action    string `json:"action"`
	Target    string `json:"target"`
	Decision  string `json:"decision"`
	Reason    string `json:"reason,omitempty"`
	CommandID string `json:"commandId,omitempty"`
	PrevHash  string `json:"prevHash"`
	Hash      string `json:"hash"`
}

// chainHash is a record's hash: sha256 over the previous record's hash and the record's own
// fields (its seq and time included), as canonical JSON.
func chainHash(r AuditRecord) string {
	doc, _ := json.Marshal([]any{r.PrevHash, r.Seq, r.At.UTC().Format(time.RFC3339Nano), r.Tenant, r.Actor, r.Role, r.Action, r.Target, r.Decision, r.Reason, r.CommandID})
	sum := sha256.Sum256(doc)
	return hex.EncodeToString(sum[:])
}

// Audit appends a record to the history, chained to the last one. Seq, At and the hashes are
// set here.
func (s *Store) Audit(ctx context.Context, r AuditRecord) (AuditRecord, error) {
	ctx, tx, commit, done, err := s.begin(ctx)
	if err != nil {
		return r, err
	}
	defer done()
	var last sql.NullInt64
	var prev sql.NullString
	if err := tx.QueryRowContext(ctx, `SELECT seq, hash FROM audit ORDER BY seq DESC LIMIT 1`).Scan(&last, &prev); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return r, err
	}
	r.Seq, r.PrevHash, r.At = last.Int64+1, prev.String, time.Now().UTC()
	r.Hash = chainHash(r)
	if _, err := tx.ExecContext(ctx, `INSERT INTO audit(seq, at, tenant, actor, role, action, target, decision, reason, command_id, prev_hash, hash) VALUES(?,?,?,?,?,?,?,?,?,?,?,?)`,
		r.Seq, r.At.Format(time.RFC3339Nano), r.Tenant, r.Actor, r.Role, r.Action, r.Target, r.Decision, r.Reason, r.CommandID, r.PrevHash, r.Hash); err != nil {
		return r, err
	}
	txOf(ctx).head = &r
	return r, commit()
}

// AuditFilter selects records: each set field must match exactly; After is a cursor (the last
// seq already read); Limit caps the page (100 when 0, at most 1000).
type AuditFilter struct {
	Tenant, Actor, Action, Target, Decision, CommandID string
	After                                              int64
	Limit                                              int
}

// QueryAudit returns the records matching f in seq order, and the cursor of the next page (0
// when this page is the last).
func (s *Store) QueryAudit(ctx context.Context, f AuditFilter) ([]AuditRecord, int64, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = 100
	}
	limit = min(limit, 1000)
	where, args := []string{"seq > ?"}, []any{f.After}
	for col, v := range map[string]string{"tenant": f.Tenant, "actor": f.Actor, "action": f.Action, "target": f.Target, "decision": f.Decision, "command_id": f.CommandID} {
		if v != "" {
			where, args = append(where, col+" = ?"), append(args, v)
		}
	}
	rows, err := s.q(ctx).QueryContext(ctx, `SELECT seq, at, tenant, actor, role, action, target, decision, reason, command_id, prev_hash, hash FROM audit WHERE `+
		strings.Join(where, " AND ")+` ORDER BY seq LIMIT ?`, append(args, limit+1)...)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	out := []AuditRecord{}
	for rows.Next() {
		r, err := scanAudit(rows)
		if err != nil {
			return nil, 0, err
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, 0, err
	}
	var next int64
	if len(out) > limit {
		out = out[:limit]
		next = out[limit-1].Seq
	}
	return out, next, nil
}

func scanAudit(rows *sql.Rows) (AuditRecord, error) {
	var r AuditRecord
	var at string
	err := rows.Scan(&r.Seq, &at, &r.Tenant, &r.Actor, &r.Role, &r.Action, &r.Target, &r.Decision, &r.Reason, &r.CommandID, &r.PrevHash, &r.Hash)
	r.At = parseTime(at)
	return r, err
}

// AuditVerification is the outcome of walking the chain.
type AuditVerification struct {
	OK      bool  `json:"ok"`
	Records int64 `json:"records"`
	// Head is the last record's hash: kept outside the database (a ticket, a log), it also
	// reveals records removed from the end, which a chain alone cannot.
	Head string `json:"head,omitempty"`
	// BrokenAt is the first record that does not verify, and Reason why.
	BrokenAt int64  `json:"brokenAt,omitempty"`
	Reason   string `json:"reason,omitempty"`
	// Anchor is the checkpoint the history was checked against (checkpoint.go), when there is one.
	Anchor *Anchor `json:"anchor,omitempty"`
}

// auditHash returns the hash of record seq, and whether it exists.
func (s *Store) auditHash(ctx context.Context, seq int64) (string, bool, error) {
	var h string
	err := s.q(ctx).QueryRowContext(ctx, `SELECT hash FROM audit WHERE seq = ?`, seq).Scan(&h)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	return h, err == nil, err
}

// VerifyAudit walks the whole chain in seq order and names the first broken record: one whose
// content no longer gives its hash (edited), whose prev_hash is not the hash of the record
// before it (a record removed or inserted before it), or whose seq skips (a record removed).
func (s *Store) VerifyAudit(ctx context.Context) (AuditVerification, error) {
	rows, err := s.q(ctx).QueryContext(ctx, `SELECT seq, at, tenant, actor, role, action, target, decision, reason, command_id, prev_hash, hash FROM audit ORDER BY seq`)
	if err != nil {
		return AuditVerification{}, err
	}
	defer rows.Close()
	v := AuditVerification{OK: true}
	prev, want := "", int64(1)
	for rows.Next() {
		r, err := scanAudit(rows)
		if err != nil {
			return v, err
		}
		v.Records++
		if v.OK {
			switch {
			case r.Seq != want:
				v.OK, v.BrokenAt, v.Reason = false, r.Seq, fmt.Sprintf("record %d follows record %d: the records between were removed", r.Seq, want-1)
			case r.PrevHash != prev:
				v.OK, v.BrokenAt, v.Reason = false, r.Seq, fmt.Sprintf("record %d does not chain to record %d (prev_hash differs): a record before it was changed, removed or inserted", r.Seq, r.Seq-1)
			case chainHash(r) != r.Hash:
				v.OK, v.BrokenAt, v.Reason = false, r.Seq, fmt.Sprintf("record %d was changed after it was written (its content does not give its hash)", r.Seq)
			}
		}
		prev, want, v.Head = r.Hash, r.Seq+1, r.Hash
	}
	return v, rows.Err()
}

// auditEntry is what the record of a request holds beyond its action: who, in what role, in
// which tenant, on what target (only objects the request resolved: nothing of the path's own
// text), the command it queued, and the reason of an allowed record.
type auditEntry struct {
	actor, role, tenant, target, commandID, reason string
	// anonymous: the request carried no valid token. Its refusal is recorded without a tenant
	// or a target, and at most noisePerMinute of them a minute.
	anonymous bool
}

func (e *auditEntry) record(action, decision, reason string) AuditRecord {
	return AuditRecord{Tenant: e.tenant, Actor: e.actor, Role: e.role, Action: action, Target: e.target,
		Decision: decision, Reason: truncate(reason, 512), CommandID: e.commandID}
}

type auditKey struct{}

// auditOf is the entry of the request being served (a throwaway one outside an endpoint).
func auditOf(r *http.Request) *auditEntry {
	if e, ok := r.Context().Value(auditKey{}).(*auditEntry); ok {
		return e
	}
	return &auditEntry{}
}

// noisePerMinute bounds the refusals of requests without a valid token that are recorded: a
// scan cannot flood the history; the next record written says how many were left out.
const noisePerMinute = 10

// noiseLimiter counts refusals of requests without a valid token, a minute at a time.
type noiseLimiter struct {
	mu                sync.Mutex
	window            time.Time
	recorded, dropped int
}

// admit reports whether a refusal at now is recorded, and how many were left out before it.
func (n *noiseLimiter) admit(now time.Time) (bool, int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if now.Sub(n.window) >= time.Minute {
		n.window, n.recorded = now, 0
	}
	if n.recorded >= noisePerMinute {
		n.dropped++
		return false, 0
	}
	n.recorded++
	left := n.dropped
	n.dropped = 0
	return true, left
}

// auditRefusal records a refused request in a transaction of its own; a failure to audit is
// logged (the refusal itself was answered).
func (s *Server) auditRefusal(ctx context.Context, e *auditEntry, action, reason string) {
	if e.anonymous {
		ok, left := s.noise.admit(s.now())
		if !ok {
			return
		}
		if left > 0 {
			reason += fmt.Sprintf(" (%d more requests without a valid token were refused and not recorded before this one)", left)
		}
		e.tenant, e.target, e.commandID = "", "", ""
	}
	if _, err := s.Store.Audit(context.WithoutCancel(ctx), e.record(action, Refused, reason)); err != nil {
		s.log().Error("audit record not written", "action", action, "error", err)
	}
}

// AuditPage is the admin API's answer to an audit query.
type AuditPage struct {
	Records []AuditRecord `json:"records"`
	// Next is the cursor of the next page (after=Next); 0 when this is the last.
	Next int64 `json:"next,omitempty"`
}

// auditFilter reads the audit query's parameters, refusing a bad one (400).
func auditFilter(r *http.Request) (AuditFilter, error) {
	q := r.URL.Query()
	f := AuditFilter{Tenant: q.Get("tenant"), Actor: q.Get("actor"), Action: q.Get("action"), Target: q.Get("target"), Decision: q.Get("decision"), CommandID: q.Get("command")}
	if v := q.Get("after"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return f, fail(http.StatusBadRequest, "after must be a record number (the next of the previous page)")
		}
		f.After = n
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 1000 {
			return f, fail(http.StatusBadRequest, "limit must be between 1 and 1000")
		}
		f.Limit = n
	}
	if f.Decision != "" && f.Decision != Allowed && f.Decision != Refused {
		return f, fail(http.StatusBadRequest, "decision must be %s or %s", Allowed, Refused)
	}
	return f, nil
}

// queryAudit is GET /admin/audit?tenant=&actor=&action=&target=&decision=&command=&after=&limit=
// (the admin token: the whole history).
func (s *Server) queryAudit(w http.ResponseWriter, r *http.Request) error {
	f, err := auditFilter(r)
	if err != nil {
		return err
	}
	return s.answerAudit(w, r, f)
}

// tenantAudit is GET /admin/tenants/{tenant}/audit: the same query, within the tenant. The
// tenant's history holds what its principals did, what the admin did in it, and the Manager's
// deliveries and acknowledgements of the commands queued for its environments.
func (s *Server) tenantAudit(w http.ResponseWriter, r *http.Request, _ caller) error {
	f, err := auditFilter(r)
	if err != nil {
		return err
	}
	f.Tenant = r.PathValue("tenant")
	return s.answerAudit(w, r, f)
}

func (s *Server) answerAudit(w http.ResponseWriter, r *http.Request, f AuditFilter) error {
	records, next, err := s.Store.QueryAudit(r.Context(), f)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, AuditPage{Records: records, Next: next})
	return nil
}

// verifyAudit is GET /admin/audit/verify: the chain, and its head against the checkpoint kept
// outside the database (checkpoint.go).
func (s *Server) verifyAudit(w http.ResponseWriter, r *http.Request) error {
	v, err := s.Store.VerifyAudit(r.Context())
	if err != nil {
		return err
	}
	if err := s.checkAnchor(r.Context(), &v); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}
