// Environments and their connect tokens: only hashes are stored; a rotation keeps the previous
// token until the Manager uses the new one or its grace ends.

package storage

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

// Environment is a registered environment.
type Environment struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	ClusterID string    `json:"clusterId,omitempty"`
	Created   time.Time `json:"created"`
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
