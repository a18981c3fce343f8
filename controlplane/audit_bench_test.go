package controlplane_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/nexo-io/nexo-edge/controlplane/storage"
)

// auditStore is a Store with n records from 50 actors and 10 actions, a tenth of them refused.
func auditStore(b *testing.B, n int) *storage.Store {
	b.Helper()
	s, err := storage.Open(filepath.Join(b.TempDir(), "audit.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	for i := 0; i < n; i++ {
		decision := storage.Allowed
		if i%10 == 0 {
			decision = storage.Refused
		}
		if _, err := s.Audit(context.Background(), storage.AuditRecord{Actor: fmt.Sprintf("user-%d", i%50), Role: "editor",
			Action: fmt.Sprintf("action-%d", i%10), Target: fmt.Sprintf("env-%d", i%100), Decision: decision}); err != nil {
			b.Fatal(err)
		}
	}
	return s
}

// BenchmarkAuditAppend: one record appended to the chain (a transaction: read the last hash,
// insert), on a history that grows by b.N.
func BenchmarkAuditAppend(b *testing.B) {
	s := auditStore(b, 0)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := s.Audit(context.Background(), storage.AuditRecord{Actor: "admin", Role: "admin", Action: "command.queue", Target: "env", Decision: storage.Allowed}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAuditQuery10k: 10,000 records appended, then one page (100) of an actor's refused
// records, the filter a review runs.
func BenchmarkAuditQuery10k(b *testing.B) {
	s := auditStore(b, 10000)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		recs, _, err := s.QueryAudit(context.Background(), storage.AuditFilter{Actor: "user-10", Decision: storage.Refused, Limit: 100})
		if err != nil || len(recs) == 0 {
			b.Fatalf("%d records, %v", len(recs), err)
		}
	}
}

// BenchmarkAuditVerify10k: the whole chain of 10,000 records walked and re-hashed.
func BenchmarkAuditVerify10k(b *testing.B) {
	s := auditStore(b, 10000)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if v, err := s.VerifyAudit(context.Background()); err != nil || !v.OK {
			b.Fatalf("%+v %v", v, err)
		}
	}
}
