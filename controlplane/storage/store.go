// Package storage is the reference Control Plane's storage layer: one embedded SQLite file
// (schema.go, with its migrations) holding environments and their connect-token hashes,
// heartbeats and inventories, the command queue with typed states, the deployed set, signing
// keys (sealed by the caller), tenancy, the license entitlement and the hash-chained audit
// history. Every method runs in the transaction its context carries (InTx). It knows nothing of
// HTTP: the handlers in package controlplane turn its records and errors into answers.
package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	_ "modernc.org/sqlite" // pure-Go SQLite driver
)

// Store persists environments, commands and the last heartbeat of each environment. Every
// method runs in the transaction its context carries (InTx), or on its own when there is none.
type Store struct {
	db *sql.DB
	// onAudit (OnAuditCommit) is called after a transaction that appended audit records commits, with the last
	// of them (the head the checkpoint anchors, checkpoint.go).
	onAudit func(AuditRecord)
}

// querier is what a Store method reads and writes through: the database or a transaction.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

type txKey struct{}

// txState is the transaction a context carries, and the last audit record appended in it.
type txState struct {
	tx   *sql.Tx
	head *AuditRecord
}

func txOf(ctx context.Context) *txState {
	st, _ := ctx.Value(txKey{}).(*txState)
	return st
}

// q is the transaction ctx carries, or the database.
func (s *Store) q(ctx context.Context) querier {
	if st := txOf(ctx); st != nil {
		return st.tx
	}
	return s.db
}

// InTx runs fn in one transaction: the one ctx already carries (fn joins it), or a new one,
// committed when fn returns nil and rolled back otherwise. Transactions begin IMMEDIATE (the
// write lock first), so a check and the write it allows are never split by another writer.
func (s *Store) InTx(ctx context.Context, fn func(ctx context.Context) error) error {
	ctx, _, commit, done, err := s.begin(ctx)
	if err != nil {
		return err
	}
	defer done()
	if err := fn(ctx); err != nil {
		return err
	}
	return commit()
}

// begin joins the transaction ctx carries, or starts one and returns a context carrying it.
// commit commits a transaction begin started (joined: a no-op, the outer one commits); done
// rolls back a started one that was not committed.
func (s *Store) begin(ctx context.Context) (context.Context, querier, func() error, func(), error) {
	if st := txOf(ctx); st != nil {
		return ctx, st.tx, func() error { return nil }, func() {}, nil
	}
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return ctx, nil, nil, nil, err
	}
	st := &txState{tx: tx}
	commit := func() error {
		if err := tx.Commit(); err != nil {
			return err
		}
		if st.head != nil && s.onAudit != nil {
			s.onAudit(*st.head)
		}
		return nil
	}
	return context.WithValue(ctx, txKey{}, st), tx, commit, func() { _ = tx.Rollback() }, nil
}

// ErrNotFound is returned for unknown environments, tokens and commands.
var ErrNotFound = errors.New("not found")

// Open opens (creating if needed) the database at path.
func Open(path string) (*Store, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_txlock=immediate")
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1) // one writer; SQLite serialises anyway, and a request's transaction holds it
	if _, err := db.Exec(schema + auditSchema + tenancySchema + entitlementSchema + changesSchema); err != nil {
		db.Close()
		return nil, fmt.Errorf("create schema: %w", err)
	}
	if err := migrate(db); err != nil {
		db.Close()
		return nil, fmt.Errorf("migrate the schema: %w", err)
	}
	return &Store{db: db}, nil
}

// OnAuditCommit has fn called after every transaction that appended audit records commits, with
// the last of them (the head an audit checkpoint anchors).
func (s *Store) OnAuditCommit(fn func(AuditRecord)) { s.onAudit = fn }

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

func now() string { return time.Now().UTC().Format(time.RFC3339Nano) }

func parseTime(s string) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, s)
	return t
}
