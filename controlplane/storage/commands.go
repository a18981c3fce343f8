// The command queue of each environment: typed states, delivery with a dead letter after
// MaxDeliveries, acknowledgements, the proxies each command carries, and the deployed set.

package storage

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"github.com/nexo-io/nexo-edge/contract/protocol"
)

// CommandState is where a queued command is in its life: pending (queued), delivered (in a
// heartbeat answer, not yet acknowledged), then applied or failed (the Manager's
// acknowledgement), or dead (delivered MaxDeliveries times without one).
type CommandState string

// Command states.
const (
	CommandPending   CommandState = "pending"
	CommandDelivered CommandState = "delivered"
	CommandApplied   CommandState = protocol.Applied
	CommandFailed    CommandState = protocol.Failed
	CommandDead      CommandState = "dead"
)

// Open reports whether the command still waits for its Manager: pending or delivered. Open
// commands are delivered, and the proxies of an open deploy count against the entitlement.
func (c CommandState) Open() bool { return c == CommandPending || c == CommandDelivered }

// CommandRecord is a queued command and its outcome.
type CommandRecord struct {
	ID   string `json:"id"`
	Type string `json:"type"`
	Body string `json:"-"`
	// Seq orders an environment's commands (an integer: timestamps tie and misorder) and is the
	// signature revision of the manifests the command carries.
	Seq        int64        `json:"seq"`
	Status     CommandState `json:"status"`
	Deliveries int          `json:"deliveries"`
	Message    string       `json:"message,omitempty"`
	Created    time.Time    `json:"created"`
	Acked      *time.Time   `json:"acked,omitempty"`
}

// MaxDeliveries is how often a command is delivered without an acknowledgement before it is
// dead-lettered (status "dead"): a command that crashes the Manager is not redelivered forever.
const MaxDeliveries = 5

// deliveryBudget bounds the bytes of command bodies in one heartbeat answer; the rest wait for
// the next heartbeat (the first command is always delivered, whatever its size).
const deliveryBudget = 4 << 20

// Origin is where a command came from: the project and stage a deploy, rollout or uninstall
// went through (both empty for the admin token's commands).
type Origin struct{ Project, Stage string }

// NewCommand is a command to queue.
type NewCommand struct {
	Env, ID, Type string
	Origin        Origin
	// Proxies are the NexoProxies the command carries (the environment view reports their
	// state). With Claims they count against the tenant's entitlement while the command is open
	// (protocol.CommandType.CountsAgainstEntitlement).
	Proxies []protocol.ObjectRef
	Claims  bool
}

// Enqueue adds a pending command in one transaction: render receives the command's sequence
// number (the signature revision of its manifests) and returns the body to store.
func (s *Store) Enqueue(ctx context.Context, c NewCommand, render func(seq int64) (string, error)) (int64, error) {
	ctx, tx, commit, done, err := s.begin(ctx)
	if err != nil {
		return 0, err
	}
	defer done()
	res, err := tx.ExecContext(ctx, `INSERT INTO commands(id, env_id, type, body, status, created, project, stage) VALUES(?,?,?,'',?,?,?,?)`,
		c.ID, c.Env, c.Type, CommandPending, now(), c.Origin.Project, c.Origin.Stage)
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
	for _, p := range c.Proxies {
		if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO command_proxies(command_id, env_id, namespace, name, claims) VALUES(?,?,?,?,?)`,
			c.ID, c.Env, p.Namespace, p.Name, c.Claims); err != nil {
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
	if _, err := tx.ExecContext(ctx, `UPDATE commands SET status = ?, acked = ?,
		message = 'not acknowledged after ' || deliveries || ' deliveries; no longer delivered (the Manager may have crashed on it: check its logs)'
		WHERE env_id = ? AND status IN (?, ?) AND deliveries >= ?`, CommandDead, now(), envID, CommandPending, CommandDelivered, MaxDeliveries); err != nil {
		return nil, err
	}
	rows, err := tx.QueryContext(ctx, `SELECT seq, id, type, body, status, deliveries, created FROM commands
		WHERE env_id = ? AND status IN (?, ?) ORDER BY seq`, envID, CommandPending, CommandDelivered)
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
		if _, err := tx.ExecContext(ctx, `UPDATE commands SET status = ?, deliveries = deliveries + 1 WHERE seq = ?`, CommandDelivered, c.Seq); err != nil {
			return nil, err
		}
	}
	return out, commit()
}

// Ack records a command's outcome, and with an applied deploy or rollout, its manifests in the
// desired set (one transaction). Acknowledging an already acknowledged command changes nothing
// and is not an error; a dead-lettered command acknowledged late records its real outcome.
func (s *Store) Ack(ctx context.Context, envID, id string, status CommandState, message string, desired func(body string) []DesiredObject) error {
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
		WHERE env_id = ? AND id = ? AND status IN (?, ?, ?)`, status, message, now(), envID, id, CommandPending, CommandDelivered, CommandDead)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 1 && status == CommandApplied && desired != nil {
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

// CommandProxies returns the proxies of each command of envID, from command_proxies; an
// uninstall queued before uninstalls recorded their proxy there has it read from its body.
func (s *Store) CommandProxies(ctx context.Context, envID string) (map[string][]protocol.ObjectRef, error) {
	out := map[string][]protocol.ObjectRef{}
	rows, err := s.q(ctx).QueryContext(ctx, `SELECT command_id, namespace, name FROM command_proxies WHERE env_id = ? ORDER BY namespace, name`, envID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var ref protocol.ObjectRef
		if err := rows.Scan(&id, &ref.Namespace, &ref.Name); err != nil {
			return nil, err
		}
		out[id] = append(out[id], ref)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	uninstalls, err := s.q(ctx).QueryContext(ctx, `SELECT id, body FROM commands WHERE env_id = ? AND type = ?`, envID, protocol.Uninstall)
	if err != nil {
		return nil, err
	}
	defer uninstalls.Close()
	for uninstalls.Next() {
		var id, body string
		if err := uninstalls.Scan(&id, &body); err != nil {
			return nil, err
		}
		var c protocol.Command
		if json.Unmarshal([]byte(body), &c) == nil && c.Proxy != nil {
			out[id] = []protocol.ObjectRef{*c.Proxy}
		}
	}
	return out, uninstalls.Err()
}
