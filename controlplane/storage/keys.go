// The Control Plane's signing keys: one active, previous ones trusted until retired. The
// private keys arrive sealed (the HTTP layer seals and opens them).

package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

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
