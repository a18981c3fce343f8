// Heartbeats and the inventory of each environment: its last heartbeat with its capabilities,
// and the proxies its Manager reports, kept current by the changes each heartbeat carries.

package storage

import (
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nexo-io/nexo-edge/contract/protocol"
)

// RecordHeartbeat keeps the environment's last heartbeat and the capabilities it advertised.
func (s *Store) RecordHeartbeat(ctx context.Context, envID, body string, capabilities []string) error {
	if capabilities == nil {
		capabilities = []string{}
	}
	caps, err := json.Marshal(capabilities)
	if err != nil {
		return err
	}
	_, err = s.q(ctx).ExecContext(ctx, `INSERT INTO heartbeats(env_id, at, body, capabilities) VALUES(?,?,?,?)
		ON CONFLICT(env_id) DO UPDATE SET at = excluded.at, body = excluded.body, capabilities = excluded.capabilities`, envID, now(), body, string(caps))
	return err
}

// Capabilities are those the environment's last heartbeat advertised; heard is false when its
// Manager never sent one.
func (s *Store) Capabilities(ctx context.Context, envID string) (caps []string, heard bool, err error) {
	var raw string
	err = s.q(ctx).QueryRowContext(ctx, `SELECT capabilities FROM heartbeats WHERE env_id = ?`, envID).Scan(&raw)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	if err := json.Unmarshal([]byte(raw), &caps); err != nil {
		return nil, true, fmt.Errorf("the capabilities stored for environment %s: %w", envID, err)
	}
	return caps, true, nil
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
