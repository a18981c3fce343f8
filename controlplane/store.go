// Package controlplane is the reference Control Plane: environments with connect tokens (only
// their hashes are stored), the Manager protocol (heartbeat, ack), a command queue per
// environment and an admin API. Storage is embedded SQLite, so a restart loses nothing.
package controlplane

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	_ "modernc.org/sqlite" // pure-Go SQLite driver
)

// Store persists environments, commands and the last heartbeat of each environment.
type Store struct{ db *sql.DB }

// Environment is a registered environment.
type Environment struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	ClusterID string    `json:"clusterId,omitempty"`
	Created   time.Time `json:"created"`
}

// CommandRecord is a queued command and its outcome.
type CommandRecord struct {
	ID      string     `json:"id"`
	Type    string     `json:"type"`
	Body    string     `json:"-"`
	Status  string     `json:"status"` // pending, delivered, applied, failed
	Message string     `json:"message,omitempty"`
	Created time.Time  `json:"created"`
	Acked   *time.Time `json:"acked,omitempty"`
}

// ErrNotFound is returned for unknown environments, tokens and commands.
var ErrNotFound = errors.New("not found")

const schema = `
CREATE TABLE IF NOT EXISTS environments (
  id TEXT PRIMARY KEY, name TEXT NOT NULL, token_hash TEXT NOT NULL UNIQUE,
  cluster_id TEXT NOT NULL DEFAULT '', created TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS commands (
  id TEXT PRIMARY KEY, env_id TEXT NOT NULL REFERENCES environments(id), type TEXT NOT NULL,
  body TEXT NOT NULL, status TEXT NOT NULL, message TEXT NOT NULL DEFAULT '',
  created TEXT NOT NULL, acked TEXT);
CREATE INDEX IF NOT EXISTS commands_env ON commands(env_id, created);
CREATE TABLE IF NOT EXISTS heartbeats (env_id TEXT PRIMARY KEY, at TEXT NOT NULL, body TEXT NOT NULL);
`

// Open opens (creating if needed) the database at path.
func Open(path string) (*Store, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)")
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1) // one writer; SQLite serialises anyway
	if _, err := db.Exec(schema); err != nil {
		db.Close()
		return nil, fmt.Errorf("create schema: %w", err)
	}
	return &Store{db: db}, nil
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

func now() string { return time.Now().UTC().Format(time.RFC3339Nano) }

func parseTime(s string) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, s)
	return t
}

// CreateEnvironment stores an environment with its token hash.
func (s *Store) CreateEnvironment(ctx context.Context, id, name, tokenHash string) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO environments(id, name, token_hash, created) VALUES(?,?,?,?)`, id, name, tokenHash, now())
	return err
}

// EnvironmentByTokenHash finds the environment a token belongs to.
func (s *Store) EnvironmentByTokenHash(ctx context.Context, hash string) (Environment, error) {
	return s.env(ctx, `SELECT id, name, cluster_id, created FROM environments WHERE token_hash = ?`, hash)
}

// Environment reads one environment.
func (s *Store) Environment(ctx context.Context, id string) (Environment, error) {
	return s.env(ctx, `SELECT id, name, cluster_id, created FROM environments WHERE id = ?`, id)
}

func (s *Store) env(ctx context.Context, q, arg string) (Environment, error) {
	var e Environment
	var created string
	err := s.db.QueryRowContext(ctx, q, arg).Scan(&e.ID, &e.Name, &e.ClusterID, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return e, ErrNotFound
	}
	e.Created = parseTime(created)
	return e, err
}

// BindCluster binds an unbound environment to a cluster identity. It reports whether the
// environment is (now) bound to clusterID.
func (s *Store) BindCluster(ctx context.Context, envID, clusterID string) (bool, error) {
	if _, err := s.db.ExecContext(ctx, `UPDATE environments SET cluster_id = ? WHERE id = ? AND cluster_id = ''`, clusterID, envID); err != nil {
		return false, err
	}
	e, err := s.Environment(ctx, envID)
	return err == nil && e.ClusterID == clusterID, err
}

// RecordHeartbeat keeps the environment's last heartbeat.
func (s *Store) RecordHeartbeat(ctx context.Context, envID, body string) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO heartbeats(env_id, at, body) VALUES(?,?,?)
		ON CONFLICT(env_id) DO UPDATE SET at = excluded.at, body = excluded.body`, envID, now(), body)
	return err
}

// LastHeartbeat returns the environment's last heartbeat, if any.
func (s *Store) LastHeartbeat(ctx context.Context, envID string) (time.Time, string, error) {
	var at, body string
	err := s.db.QueryRowContext(ctx, `SELECT at, body FROM heartbeats WHERE env_id = ?`, envID).Scan(&at, &body)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, "", nil
	}
	return parseTime(at), body, err
}

// Enqueue adds a pending command.
func (s *Store) Enqueue(ctx context.Context, envID, id, typ, body string) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO commands(id, env_id, type, body, status, created) VALUES(?,?,?,?,'pending',?)`, id, envID, typ, body, now())
	return err
}

// Deliver returns the commands not yet acknowledged (pending or delivered, oldest first) and
// marks them delivered. Delivery is at least once; the Manager applies an id at most once.
func (s *Store) Deliver(ctx context.Context, envID string) ([]CommandRecord, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, type, body, status, created FROM commands
		WHERE env_id = ? AND status IN ('pending','delivered') ORDER BY created, id`, envID)
	if err != nil {
		return nil, err
	}
	var out []CommandRecord
	for rows.Next() {
		var c CommandRecord
		var created string
		if err := rows.Scan(&c.ID, &c.Type, &c.Body, &c.Status, &created); err != nil {
			rows.Close()
			return nil, err
		}
		c.Created = parseTime(created)
		out = append(out, c)
	}
	rows.Close()
	if _, err := s.db.ExecContext(ctx, `UPDATE commands SET status = 'delivered' WHERE env_id = ? AND status = 'pending'`, envID); err != nil {
		return nil, err
	}
	return out, rows.Err()
}

// Ack records a command's outcome. Acknowledging an already acknowledged command changes
// nothing and is not an error.
func (s *Store) Ack(ctx context.Context, envID, id, status, message string) error {
	res, err := s.db.ExecContext(ctx, `UPDATE commands SET status = ?, message = ?, acked = ?
		WHERE env_id = ? AND id = ? AND status IN ('pending','delivered')`, status, message, now(), envID, id)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		var exists int
		if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM commands WHERE env_id = ? AND id = ?`, envID, id).Scan(&exists); err != nil {
			return err
		}
		if exists == 0 {
			return ErrNotFound
		}
	}
	return nil
}

// Commands lists an environment's command history, oldest first.
func (s *Store) Commands(ctx context.Context, envID string) ([]CommandRecord, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, type, status, message, created, acked FROM commands WHERE env_id = ? ORDER BY created, id`, envID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []CommandRecord
	for rows.Next() {
		var c CommandRecord
		var created string
		var acked sql.NullString
		if err := rows.Scan(&c.ID, &c.Type, &c.Status, &c.Message, &created, &acked); err != nil {
			return nil, err
		}
		c.Created = parseTime(created)
		if acked.Valid {
			t := parseTime(acked.String)
			c.Acked = &t
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// DeployBodies returns the bodies of an environment's applied deploy commands, newest first.
func (s *Store) DeployBodies(ctx context.Context, envID string) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT body FROM commands WHERE env_id = ? AND type = 'deploy' AND status = 'applied' ORDER BY created DESC, id DESC`, envID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var b string
		if err := rows.Scan(&b); err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, rows.Err()
}
