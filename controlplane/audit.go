// The audit history (docs/controlplane.md, "Audit"): every admin action and every decision,
// allowed or refused, every command's delivery and its Manager's acknowledgement, one row each
// in an append-only table the database itself refuses to update or delete, each row chained to
// the one before by a sha256 hash. A row holds who, in what role, did what to what, the decision
// and its reason and the command id: never a token or a manifest body.

package controlplane

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/nexo-io/nexo-edge/controlplane/authz"
	"github.com/nexo-io/nexo-edge/controlplane/storage"
)

// auditEntry is what the record of a request holds beyond its action: who, in what role, in
// which tenant, on what target (only objects the request resolved: nothing of the path's own
// text), the command it queued, and the reason of an allowed record.
type auditEntry struct {
	actor, role, tenant, target, commandID, reason string
	// anonymous: the request carried no valid token. Its refusal is recorded without a tenant
	// or a target, and at most noisePerMinute of them a minute.
	anonymous bool
	// otherTenant is the tenant a principal of another tenant tried to act in: its refusal is
	// recorded in that tenant's history too.
	otherTenant string
}

func (e *auditEntry) record(action, decision, reason string) storage.AuditRecord {
	return storage.AuditRecord{Tenant: e.tenant, Actor: e.actor, Role: e.role, Action: action, Target: e.target,
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
	if _, err := s.cfg.Store.Audit(context.WithoutCancel(ctx), e.record(action, storage.Refused, reason)); err != nil {
		s.log().Error("audit record not written", "action", action, "error", err)
	}
	if e.otherTenant != "" && e.otherTenant != e.tenant {
		there := *e
		there.tenant, there.target = e.otherTenant, "tenant "+e.otherTenant
		if _, err := s.cfg.Store.Audit(context.WithoutCancel(ctx), there.record(action, storage.Refused, reason)); err != nil {
			s.log().Error("audit record not written", "action", action, "tenant", e.otherTenant, "error", err)
		}
	}
}

// AuditPage is the admin API's answer to an audit query.
type AuditPage struct {
	Records []storage.AuditRecord `json:"records"`
	// Next is the cursor of the next page (after=Next); 0 when this is the last.
	Next int64 `json:"next,omitempty"`
}

// auditFilter reads the audit query's parameters, refusing a bad one (400).
func auditFilter(r *http.Request) (storage.AuditFilter, error) {
	q := r.URL.Query()
	f := storage.AuditFilter{Tenant: q.Get("tenant"), Actor: q.Get("actor"), Action: q.Get("action"), Target: q.Get("target"), Decision: q.Get("decision"), CommandID: q.Get("command")}
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
	if f.Decision != "" && f.Decision != storage.Allowed && f.Decision != storage.Refused {
		return f, fail(http.StatusBadRequest, "decision must be %s or %s", storage.Allowed, storage.Refused)
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
func (s *Server) tenantAudit(w http.ResponseWriter, r *http.Request, _ authz.Caller) error {
	f, err := auditFilter(r)
	if err != nil {
		return err
	}
	f.Tenant = r.PathValue("tenant")
	return s.answerAudit(w, r, f)
}

func (s *Server) answerAudit(w http.ResponseWriter, r *http.Request, f storage.AuditFilter) error {
	records, next, err := s.cfg.Store.QueryAudit(r.Context(), f)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, AuditPage{Records: records, Next: next})
	return nil
}

// verifyAudit is GET /admin/audit/verify: the chain, and its head against the checkpoint kept
// outside the database (checkpoint.go).
func (s *Server) verifyAudit(w http.ResponseWriter, r *http.Request) error {
	v, err := s.cfg.Store.VerifyAudit(r.Context())
	if err != nil {
		return err
	}
	if err := s.checkAnchor(r.Context(), &v); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}
