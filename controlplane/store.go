// Package controlplane is the reference Control Plane: environments with connect tokens (only
// their hashes are stored), the Manager protocol (heartbeat, ack), a command queue per
// environment and an admin API. Storage is embedded SQLite, so a restart loses nothing.
package controlplane

import (
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	_ "modernc.org/sqlite" // pure-Go SQLite driver

	"github.com/nexo-io/nexo-edge/contract/protocol"
)

// Store persists environments, commands and the last heartbeat of each environment. Every
// method runs in the transaction its context carries (InTx), or on its own when there is none.
type Store struct {
	db *sql.DB
	// onAudit is called after a transaction that appended audit records commits, with the last
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

// Environment is a registered environment.
type Environment struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	ClusterID string    `json:"clusterId,omitempty"`
	Created   time.Time `json:"created"`
}

// CommandRecord is a queued command and its outcome.
type CommandRecord struct {
	ID   string `json:"id"`
	Type string `json:"type"`
	Body string `json:"-"`
	// Seq orders an environment's commands (an integer: timestamps tie and misorder) and is the
	// signature revision of the manifests the command carries.
	Seq        int64      `json:"seq"`
	Status     string     `json:"status"` // pending, delivered, applied, failed, dead
	Deliveries int        `json:"deliveries"`
	Message    string     `json:"message,omitempty"`
	Created    time.Time  `json:"created"`
	Acked      *time.Time `json:"acked,omitempty"`
	// Targets are the proxies the command carries and their state now (targets.go), in the
	// environment view.
	Targets []TargetStatus `json:"targets,omitempty"`
}

// ErrNotFound is returned for unknown environments, tokens and commands.
var ErrNotFound = errors.New("not found")

const schema = `
CREATE TABLE IF NOT EXISTS environments (
  id TEXT PRIMARY KEY, name TEXT NOT NULL, token_hash TEXT NOT NULL UNIQUE,
  cluster_id TEXT NOT NULL DEFAULT '', created TEXT NOT NULL,
  -- token rotation: the previous token stays valid until the Manager uses the new one or the
  -- grace deadline passes; the last retired one is remembered to say "rotated" when it is used.
  old_token_hash TEXT NOT NULL DEFAULT '', old_token_until TEXT NOT NULL DEFAULT '',
  retired_token_hash TEXT NOT NULL DEFAULT '', rotated TEXT NOT NULL DEFAULT '');
CREATE TABLE IF NOT EXISTS commands (
  seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE,
  env_id TEXT NOT NULL REFERENCES environments(id), type TEXT NOT NULL,
  body TEXT NOT NULL, status TEXT NOT NULL, message TEXT NOT NULL DEFAULT '',
  deliveries INTEGER NOT NULL DEFAULT 0, created TEXT NOT NULL, acked TEXT);
CREATE INDEX IF NOT EXISTS commands_env ON commands(env_id, seq);
CREATE TABLE IF NOT EXISTS signing_keys (
  key_id TEXT PRIMARY KEY, private_pem TEXT NOT NULL, state TEXT NOT NULL, created TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS heartbeats (env_id TEXT PRIMARY KEY, at TEXT NOT NULL, body TEXT NOT NULL);
-- inventory is what the environment's Manager last reported of its proxies, one row each, kept
-- current by the changes heartbeats carry; inventory_digest is its protocol.Digest, and whether
-- it equals the Manager's (complete) or changes are still on their way.
CREATE TABLE IF NOT EXISTS inventory (
  env_id TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL, body TEXT NOT NULL,
  PRIMARY KEY (env_id, namespace, name));
CREATE TABLE IF NOT EXISTS inventory_digest (env_id TEXT PRIMARY KEY, digest TEXT NOT NULL, complete INTEGER NOT NULL);
-- desired is the environment's deployed set: what a rollout re-signs. A deploy adds to it when
-- the Manager acknowledges it applied; an uninstall removes its proxy when it is queued. project
-- and stage are those the deploy went through ('' for the admin token's commands): a stage's
-- rollout and uninstall touch only its project's objects.
-- command_proxies are the NexoProxies a deploy or rollout carries: while the command is pending
-- or delivered they count against the tenant's entitlement (entitlement.go).
CREATE TABLE IF NOT EXISTS command_proxies (
  command_id TEXT NOT NULL, env_id TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL,
  PRIMARY KEY (command_id, namespace, name));
CREATE TABLE IF NOT EXISTS desired (
  env_id TEXT NOT NULL, kind TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL,
  manifest TEXT NOT NULL, PRIMARY KEY (env_id, kind, namespace, name));
`

// MaxDeliveries is how often a command is delivered without an acknowledgement before it is
// dead-lettered (status "dead"): a command that crashes the Manager is not redelivered forever.
const MaxDeliveries = 5

// deliveryBudget bounds the bytes of command bodies in one heartbeat answer; the rest wait for
// the next heartbeat (the first command is always delivered, whatever its size).
const deliveryBudget = 4 << 20

// Open opens (creating if needed) the database at path.
func Open(path string) (*Store, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_txlock=immediate")
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1) // one writer; SQLite serialises anyway, and a request's transaction holds it
	if _, err := db.Exec(schema + auditSchema + tenancySchema + entitlementSchema); err != nil {
		db.Close()
		return nil, fmt.Errorf("create schema: %w", err)
	}
	if err := migrate(db); err != nil {
		db.Close()
		return nil, fmt.Errorf("migrate the schema: %w", err)
	}
	return &Store{db: db}, nil
}

// addedColumns are the columns added after a table was first released: a database made by an
// earlier version gets them on Open (CREATE TABLE IF NOT EXISTS leaves an existing table as it
// is).
var addedColumns = []struct{ table, column, decl string }{
	{"principals", "token_expires", "TEXT NOT NULL DEFAULT ''"},
	{"stages", "shared", "INTEGER NOT NULL DEFAULT 0"},
	{"commands", "project", "TEXT NOT NULL DEFAULT ''"},
	{"commands", "stage", "TEXT NOT NULL DEFAULT ''"},
	{"desired", "project", "TEXT NOT NULL DEFAULT ''"},
	{"desired", "stage", "TEXT NOT NULL DEFAULT ''"},
}

func migrate(db *sql.DB) error {
	for _, c := range addedColumns {
		var n int
		if err := db.QueryRow(`SELECT COUNT(*) FROM pragma_table_info(?) WHERE name = ?`, c.table, c.column).Scan(&n); err != nil {
			return err
		}
		if n == 0 {
			if _, err := db.Exec(`ALTER TABLE ` + c.table + ` ADD COLUMN ` + c.column + ` ` + c.decl); err != nil {
				return fmt.Errorf("%s.%s: %w", c.table, c.column, err)
			}
		}
	}
	// Principals made before tokens expired get the default lifetime from now, not an expiry
	// already past.
	_, err := db.Exec(`UPDATE principals SET token_expires = ? WHERE token_expires = ''`,
		time.Now().Add(DefaultPrincipalTokenLifetime).UTC().Format(time.RFC3339Nano))
	return err
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
	_, err := s.q(ctx).ExecContext(ctx, `INSERT INTO environments(id, name, token_hash, created) VALUES(?,?,?,?)`, id, name, tokenHash, now())
	return err
}

// ErrTokenRotated is returned for a connect token that was replaced and whose grace ended.
var ErrTokenRotated = errors.New("connect token rotated")

// Authenticate finds the environment of a token hash at time now. The current token always
// works, and its first use ends the previous token's grace. The previous token works until then
// or until its grace deadline. A retired token returns ErrTokenRotated with the rotation time.
func (s *Store) Authenticate(ctx context.Context, hash string, at time.Time) (Environment, time.Time, error) {
	ctx, tx, commit, done, err := s.begin(ctx)
	if err != nil {
		return Environment{}, time.Time{}, err
	}
	defer done()
	var e Environment
	var created, current, old, oldUntil, retired, rotated string
	err = tx.QueryRowContext(ctx, `SELECT id, name, cluster_id, created, token_hash, old_token_hash, old_token_until, retired_token_hash, rotated
		FROM environments WHERE token_hash = ? OR (old_token_hash != '' AND old_token_hash = ?) OR (retired_token_hash != '' AND retired_token_hash = ?)`,
		hash, hash, hash).Scan(&e.ID, &e.Name, &e.ClusterID, &created, &current, &old, &oldUntil, &retired, &rotated)
	if errors.Is(err, sql.ErrNoRows) {
		return e, time.Time{}, ErrNotFound
	}
	if err != nil {
		return e, time.Time{}, err
	}
	e.Created = parseTime(created)
	rotatedAt := parseTime(rotated)
	retire := func() error {
		_, err := tx.ExecContext(ctx, `UPDATE environments SET retired_token_hash = old_token_hash, old_token_hash = '', old_token_until = '' WHERE id = ?`, e.ID)
		return err
	}
	switch {
	case hash == current:
		if old != "" { // the Manager holds the new token: the old one's grace ends now
			if err := retire(); err != nil {
				return e, time.Time{}, err
			}
		}
		return e, time.Time{}, commit()
	case hash == old && at.Before(parseTime(oldUntil)):
		return e, time.Time{}, commit()
	case hash == old:
		if err := retire(); err != nil {
			return e, time.Time{}, err
		}
		if err := commit(); err != nil {
			return e, time.Time{}, err
		}
		return e, rotatedAt, ErrTokenRotated
	default: // the retired token
		return e, rotatedAt, ErrTokenRotated
	}
}

// RotateToken makes newHash the environment's token; the current one stays valid until the new
// one is used or until graceUntil.
func (s *Store) RotateToken(ctx context.Context, envID, newHash string, graceUntil time.Time) error {
	res, err := s.q(ctx).ExecContext(ctx, `UPDATE environments SET old_token_hash = token_hash, old_token_until = ?, token_hash = ?, rotated = ? WHERE id = ?`,
		graceUntil.UTC().Format(time.RFC3339Nano), newHash, now(), envID)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrNotFound
	}
	return nil
}

// Environment reads one environment.
func (s *Store) Environment(ctx context.Context, id string) (Environment, error) {
	return s.env(ctx, `SELECT id, name, cluster_id, created FROM environments WHERE id = ?`, id)
}

func (s *Store) env(ctx context.Context, q, arg string) (Environment, error) {
	var e Environment
	var created string
	err := s.q(ctx).QueryRowContext(ctx, q, arg).Scan(&e.ID, &e.Name, &e.ClusterID, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return e, ErrNotFound
	}
	e.Created = parseTime(created)
	return e, err
}

// Environments lists every environment, oldest first.
func (s *Store) Environments(ctx context.Context) ([]Environment, error) {
	rows, err := s.q(ctx).QueryContext(ctx, `SELECT id, name, cluster_id, created FROM environments ORDER BY created, id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Environment
	for rows.Next() {
		var e Environment
		var created string
		if err := rows.Scan(&e.ID, &e.Name, &e.ClusterID, &created); err != nil {
			return nil, err
		}
		e.Created = parseTime(created)
		out = append(out, e)
	}
	return out, rows.Err()
}

// BindCluster binds an unbound environment to a cluster identity. It reports whether the
// environment is (now) bound to clusterID.
func (s *Store) BindCluster(ctx context.Context, envID, clusterID string) (bool, error) {
	if _, err := s.q(ctx).ExecContext(ctx, `UPDATE environments SET cluster_id = ? WHERE id = ? AND cluster_id = ''`, clusterID, envID); err != nil {
		return false, err
	}
	e, err := s.Environment(ctx, envID)
	return err == nil && e.ClusterID == clusterID, err
}

// RecordHeartbeat keeps the environment's last heartbeat.
func (s *Store) RecordHeartbeat(ctx context.Context, envID, body string) error {
	_, err := s.q(ctx).ExecContext(ctx, `INSERT INTO heartbeats(env_id, at, body) VALUES(?,?,?)
		ON CONFLICT(env_id) DO UPDATE SET at = excluded.at, body = excluded.body`, envID, now(), body)
	return err
}

// ApplyInventory applies a heartbeat's inventory changes in one transaction. A heartbeat based on
// the empty inventory starts over (the Manager restarted, or was asked to); one based on another
// digest than the stored one changes nothing and returns resync. It returns the digest of the
// stored inventory, which is complete when it equals want, the Manager's own.
func (s *Store) ApplyInventory(ctx context.Context, envID, base, want string, changed []protocol.Deployment, removed []protocol.ObjectRef) (digest string, resync bool, err error) {
	ctx, tx, commit, done, err := s.begin(ctx)
	if err != nil {
		return "", false, err
	}
	defer done()
	stored := protocol.EmptyInventory
	if err := tx.QueryRowContext(ctx, `SELECT digest FROM inventory_digest WHERE env_id = ?`, envID).Scan(&stored); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return "", false, err
	}
	var d protocol.Digest
	switch {
	case base == stored:
		raw, err := hex.DecodeString(stored)
		if err != nil || len(raw) != len(d) {
			return "", false, fmt.Errorf("stored inventory digest %q is not a digest", stored)
		}
		copy(d[:], raw)
	case base == protocol.EmptyInventory:
		if _, err := tx.ExecContext(ctx, `DELETE FROM inventory WHERE env_id = ?`, envID); err != nil {
			return "", false, err
		}
	default:
		return stored, true, nil
	}
	old := func(ref protocol.ObjectRef) error {
		var body string
		switch err := tx.QueryRowContext(ctx, `SELECT body FROM inventory WHERE env_id = ? AND namespace = ? AND name = ?`, envID, ref.Namespace, ref.Name).Scan(&body); {
		case errors.Is(err, sql.ErrNoRows):
			return nil
		case err != nil:
			return err
		}
		var was protocol.Deployment
		if err := json.Unmarshal([]byte(body), &was); err != nil {
			return err
		}
		d.Toggle(was)
		return nil
	}
	for _, r := range removed {
		if err := old(r); err != nil {
			return "", false, err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM inventory WHERE env_id = ? AND namespace = ? AND name = ?`, envID, r.Namespace, r.Name); err != nil {
			return "", false, err
		}
	}
	for _, c := range changed {
		if err := old(c.Key()); err != nil {
			return "", false, err
		}
		body, _ := json.Marshal(c)
		if _, err := tx.ExecContext(ctx, `INSERT INTO inventory(env_id, namespace, name, body) VALUES(?,?,?,?)
			ON CONFLICT(env_id, namespace, name) DO UPDATE SET body = excluded.body`, envID, c.Namespace, c.Name, string(body)); err != nil {
			return "", false, err
		}
		d.Toggle(c)
	}
	digest = d.String()
	if _, err := tx.ExecContext(ctx, `INSERT INTO inventory_digest(env_id, digest, complete) VALUES(?,?,?)
		ON CONFLICT(env_id) DO UPDATE SET digest = excluded.digest, complete = excluded.complete`, envID, digest, digest == want); err != nil {
		return "", false, err
	}
	return digest, false, commit()
}

// ReplaceInventory stores a full list of proxies (a Manager without inventory.delta).
func (s *Store) ReplaceInventory(ctx context.Context, envID string, all []protocol.Deployment) error {
	var d protocol.Digest
	for _, x := range all {
		d.Toggle(x)
	}
	if _, _, err := s.ApplyInventory(ctx, envID, protocol.EmptyInventory, d.String(), all, nil); err != nil {
		return err
	}
	return nil
}

// Inventory returns the stored proxies, by namespace and name, and whether they are all of the
// Manager's (false while a report spread over several heartbeats is on its way).
func (s *Store) Inventory(ctx context.Context, envID string) ([]protocol.Deployment, bool, error) {
	complete := true
	if err := s.q(ctx).QueryRowContext(ctx, `SELECT complete FROM inventory_digest WHERE env_id = ?`, envID).Scan(&complete); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, false, err
	}
	rows, err := s.q(ctx).QueryContext(ctx, `SELECT body FROM inventory WHERE env_id = ? ORDER BY namespace, name`, envID)
	if err != nil {
		return nil, false, err
	}
	defer rows.Close()
	out := []protocol.Deployment{}
	for rows.Next() {
		var body string
		var d protocol.Deployment
		if err := rows.Scan(&body); err != nil {
			return nil, false, err
		}
		if err := json.Unmarshal([]byte(body), &d); err != nil {
			return nil, false, err
		}
		out = append(out, d)
	}
	return out, complete, rows.Err()
}

// LastHeartbeat returns the environment's last heartbeat, if any.
func (s *Store) LastHeartbeat(ctx context.Context, envID string) (time.Time, string, error) {
	var at, body string
	err := s.q(ctx).QueryRowContext(ctx, `SELECT at, body FROM heartbeats WHERE env_id = ?`, envID).Scan(&at, &body)
	if errors.Is(err, sql.ErrNoRows) {
		return time.Time{}, "", nil
	}
	return parseTime(at), body, err
}

// Origin is where a command came from: the project and stage a deploy, rollout or uninstall
// went through (both empty for the admin token's commands).
type Origin struct{ Project, Stage string }

// Enqueue adds a pending command in one transaction: render receives the command's sequence
// number (the signature revision of its manifests) and returns the body to store. proxies are
// the NexoProxies (namespace/name) the command deploys, which count against the tenant's
// entitlement until it is acknowledged.
func (s *Store) Enqueue(ctx context.Context, envID, id, typ string, origin Origin, proxies []protocol.ObjectRef, render func(seq int64) (string, error)) (int64, error) {
	ctx, tx, commit, done, err := s.begin(ctx)
	if err != nil {
		return 0, err
	}
	defer done()
	res, err := tx.ExecContext(ctx, `INSERT INTO commands(id, env_id, type, body, status, created, project, stage) VALUES(?,?,?,'','pending',?,?,?)`,
		id, envID, typ, now(), origin.Project, origin.Stage)
	if err != nil {
		return 0, err
	}
	seq, err := res.LastInsertId()
	if err != nil {
		return 0, err
	}
	body, err := render(seq)
	if err != nil {
		return 0, err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE commands SET body = ? WHERE seq = ?`, body, seq); err != nil {
		return 0, err
	}
	for _, p := range proxies {
		if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO command_proxies(command_id, env_id, namespace, name) VALUES(?,?,?,?)`, id, envID, p.Namespace, p.Name); err != nil {
			return 0, err
		}
	}
	return seq, commit()
}

// Deliver returns the commands not yet acknowledged (pending or delivered, in sequence order,
// within deliveryBudget bytes) and counts the delivery, in one transaction. A command delivered
// MaxDeliveries times without an acknowledgement is dead-lettered instead. Delivery is at least
// once; the Manager applies an id at most once per recorded outcome.
func (s *Store) Deliver(ctx context.Context, envID string) ([]CommandRecord, error) {
	ctx, tx, commit, done, err := s.begin(ctx)
	if err != nil {
		return nil, err
	}
	defer done()
	if _, err := tx.ExecContext(ctx, `UPDATE commands SET status = 'dead', acked = ?,
		message = 'not acknowledged after ' || deliveries || ' deliveries; no longer delivered (the Manager may have crashed on it: check its logs)'
		WHERE env_id = ? AND status IN ('pending','delivered') AND deliveries >= ?`, now(), envID, MaxDeliveries); err != nil {
		return nil, err
	}
	rows, err := tx.QueryContext(ctx, `SELECT seq, id, type, body, status, deliveries, created FROM commands
		WHERE env_id = ? AND status IN ('pending','delivered') ORDER BY seq`, envID)
	if err != nil {
		return nil, err
	}
	var out []CommandRecord
	size := 0
	for rows.Next() {
		var c CommandRecord
		var created string
		if err := rows.Scan(&c.Seq, &c.ID, &c.Type, &c.Body, &c.Status, &c.Deliveries, &created); err != nil {
			rows.Close()
			return nil, err
		}
		if len(out) > 0 && size+len(c.Body) > deliveryBudget {
			break
		}
		size += len(c.Body)
		c.Created = parseTime(created)
		out = append(out, c)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for _, c := range out {
		if _, err := tx.ExecContext(ctx, `UPDATE commands SET status = 'delivered', deliveries = deliveries + 1 WHERE seq = ?`, c.Seq); err != nil {
			return nil, err
		}
	}
	return out, commit()
}

// Ack records a command's outcome, and with an applied deploy or rollout, its manifests in the
// desired set (one transaction). Acknowledging an already acknowledged command changes nothing
// and is not an error; a dead-lettered command acknowledged late records its real outcome.
func (s *Store) Ack(ctx context.Context, envID, id, status, message string, desired func(body string) []DesiredObject) error {
	ctx, tx, commit, done, err := s.begin(ctx)
	if err != nil {
		return err
	}
	defer done()
	var body string
	var origin Origin
	err = tx.QueryRowContext(ctx, `SELECT body, project, stage FROM commands WHERE env_id = ? AND id = ?`, envID, id).Scan(&body, &origin.Project, &origin.Stage)
	if errors.Is(err, sql.ErrNoRows) {
		return ErrNotFound
	}
	if err != nil {
		return err
	}
	res, err := tx.ExecContext(ctx, `UPDATE commands SET status = ?, message = ?, acked = ?
		WHERE env_id = ? AND id = ? AND status IN ('pending','delivered','dead')`, status, message, now(), envID, id)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 1 && status == "applied" && desired != nil {
		for _, d := range desired(body) {
			if _, err := tx.ExecContext(ctx, `INSERT INTO desired(env_id, kind, namespace, name, manifest, project, stage) VALUES(?,?,?,?,?,?,?)
				ON CONFLICT(env_id, kind, namespace, name) DO UPDATE SET manifest = excluded.manifest, project = excluded.project, stage = excluded.stage`,
				envID, d.Kind, d.Namespace, d.Name, d.Manifest, origin.Project, origin.Stage); err != nil {
				return err
			}
		}
	}
	return commit()
}

// DesiredObject is one object of an environment's deployed set.
type DesiredObject struct {
	Kind, Namespace, Name string
	// Manifest is the object as last deployed (JSON, signed).
	Manifest string
	// Origin is the project and stage that deployed it.
	Origin Origin
}

// Desired lists an environment's deployed objects of one kind.
func (s *Store) Desired(ctx context.Context, envID, kind string) ([]DesiredObject, error) {
	rows, err := s.q(ctx).QueryContext(ctx, `SELECT kind, namespace, name, manifest, project, stage FROM desired WHERE env_id = ? AND kind = ? ORDER BY namespace, name`, envID, kind)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []DesiredObject
	for rows.Next() {
		var d DesiredObject
		if err := rows.Scan(&d.Kind, &d.Namespace, &d.Name, &d.Manifest, &d.Origin.Project, &d.Origin.Stage); err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// DesiredOrigin returns the origin of one deployed object, and whether it is deployed.
func (s *Store) DesiredOrigin(ctx context.Context, envID, kind, namespace, name string) (Origin, bool, error) {
	var o Origin
	err := s.q(ctx).QueryRowContext(ctx, `SELECT project, stage FROM desired WHERE env_id = ? AND kind = ? AND namespace = ? AND name = ?`,
		envID, kind, namespace, name).Scan(&o.Project, &o.Stage)
	if errors.Is(err, sql.ErrNoRows) {
		return o, false, nil
	}
	return o, err == nil, err
}

// Forget removes an object from the deployed set (an uninstall was queued for it).
func (s *Store) Forget(ctx context.Context, envID, kind, namespace, name string) error {
	_, err := s.q(ctx).ExecContext(ctx, `DELETE FROM desired WHERE env_id = ? AND kind = ? AND namespace = ? AND name = ?`, envID, kind, namespace, name)
	return err
}

// Commands lists an environment's command history, oldest first.
func (s *Store) Commands(ctx context.Context, envID string) ([]CommandRecord, error) {
	rows, err := s.q(ctx).QueryContext(ctx, `SELECT seq, id, type, status, message, deliveries, created, acked FROM commands WHERE env_id = ? ORDER BY seq`, envID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []CommandRecord
	for rows.Next() {
		var c CommandRecord
		var created string
		var acked sql.NullString
		if err := rows.Scan(&c.Seq, &c.ID, &c.Type, &c.Status, &c.Message, &c.Deliveries, &created, &acked); err != nil {
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

// Signing-key states.
const (
	KeyActive   = "active"
	KeyPrevious = "previous"
	KeyRetired  = "retired"
)

// StoredKey is one Control Plane signing key. PrivatePEM is as stored (sealed, keys.go) when
// read from the store, and opened when Server.keys returns it.
type StoredKey struct {
	KeyID, PrivatePEM, State string
}

// SigningKeys lists every signing key, newest first.
func (s *Store) SigningKeys(ctx context.Context) ([]StoredKey, error) {
	rows, err := s.q(ctx).QueryContext(ctx, `SELECT key_id, private_pem, state FROM signing_keys ORDER BY created DESC, key_id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []StoredKey
	for rows.Next() {
		var k StoredKey
		if err := rows.Scan(&k.KeyID, &k.PrivatePEM, &k.State); err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, rows.Err()
}

// AddActiveKey makes a key the active signer; the former active key becomes previous (still
// trusted until retired), in one transaction. Adding the active key again changes nothing.
func (s *Store) AddActiveKey(ctx context.Context, keyID, privatePEM string) error {
	ctx, tx, commit, done, err := s.begin(ctx)
	if err != nil {
		return err
	}
	defer done()
	var state string
	switch err := tx.QueryRowContext(ctx, `SELECT state FROM signing_keys WHERE key_id = ?`, keyID).Scan(&state); {
	case err == nil && state == KeyActive:
		return nil
	case err == nil:
		return fmt.Errorf("signing key %s is %s and cannot become active again", keyID, state)
	case !errors.Is(err, sql.ErrNoRows):
		return err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE signing_keys SET state = ? WHERE state = ?`, KeyPrevious, KeyActive); err != nil {
		return err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO signing_keys(key_id, private_pem, state, created) VALUES(?,?,?,?)`, keyID, privatePEM, KeyActive, now()); err != nil {
		return err
	}
	return commit()
}

// SealKey replaces a key stored in plaintext by its sealed form.
func (s *Store) SealKey(ctx context.Context, keyID, sealed string) error {
	_, err := s.q(ctx).ExecContext(ctx, `UPDATE signing_keys SET private_pem = ? WHERE key_id = ?`, sealed, keyID)
	return err
}

// RetireKey stops trusting a previous key.
func (s *Store) RetireKey(ctx context.Context, keyID string) error {
	res, err := s.q(ctx).ExecContext(ctx, `UPDATE signing_keys SET state = ? WHERE key_id = ? AND state = ?`, KeyRetired, keyID, KeyPrevious)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrNotFound
	}
	return nil
}
