// The audit history (docs/controlplane.md, "Audit"): append-only, hash-chained records, queried
// by filter and verified link by link.

package storage

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

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

// AuditHash returns the hash of record seq, and whether it exists.
func (s *Store) AuditHash(ctx context.Context, seq int64) (string, bool, error) {
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

// Anchor is what a verification found of the checkpoint.
type Anchor struct {
	File string `json:"file"`
	Seq  int64  `json:"seq"`
	Hash string `json:"hash"`
}
