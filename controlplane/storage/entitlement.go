// A tenant's license entitlement and the proxies that count against it.

package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/nexo-io/nexo-edge/controlplane/targeting"
)

// SetEntitlement stores a tenant's entitlement, replacing the one before.
func (s *Store) SetEntitlement(ctx context.Context, tenant string, e targeting.Entitlement) error {
	_, err := s.q(ctx).ExecContext(ctx, `INSERT INTO entitlements(tenant_id, max_proxies, expires_at) VALUES(?,?,?)
		ON CONFLICT(tenant_id) DO UPDATE SET max_proxies = excluded.max_proxies, expires_at = excluded.expires_at`,
		tenant, e.MaxProxies, e.ExpiresAt.UTC().Format(time.RFC3339))
	return err
}

// Entitlement returns a tenant's entitlement, nil when it has none.
func (s *Store) Entitlement(ctx context.Context, tenant string) (*targeting.Entitlement, error) {
	var e targeting.Entitlement
	var expires string
	err := s.q(ctx).QueryRowContext(ctx, `SELECT max_proxies, expires_at FROM entitlements WHERE tenant_id = ?`, tenant).Scan(&e.MaxProxies, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if e.ExpiresAt, err = time.Parse(time.RFC3339, expires); err != nil {
		return nil, fmt.Errorf("entitlement of %s: %w", tenant, err)
	}
	return &e, nil
}

// ProxyClaims counts the NexoProxies a tenant holds: those its environments report (their
// inventories), those in their deployed sets, and those in deploys and rollouts queued for them
// and not yet acknowledged, each environment/namespace/name once. It returns the count, and of
// env's, the namespace/name keys.
func (s *Store) ProxyClaims(ctx context.Context, tenant, env string) (int, map[string]bool, error) {
	rows, err := s.q(ctx).QueryContext(ctx, `
		WITH envs AS (SELECT env_id FROM environment_tenancy WHERE tenant_id = ?)
		SELECT env_id, namespace, name FROM inventory WHERE env_id IN envs
		UNION SELECT env_id, namespace, name FROM desired WHERE kind = 'NexoProxy' AND env_id IN envs
		UNION SELECT p.env_id, p.namespace, p.name FROM command_proxies p JOIN commands c ON c.id = p.command_id
			WHERE p.claims = 1 AND c.status IN (?, ?) AND p.env_id IN envs`, tenant, CommandPending, CommandDelivered)
	if err != nil {
		return 0, nil, err
	}
	defer rows.Close()
	n, mine := 0, map[string]bool{}
	for rows.Next() {
		var e, ns, name string
		if err := rows.Scan(&e, &ns, &name); err != nil {
			return 0, nil, err
		}
		n++
		if e == env {
			mine[ns+"/"+name] = true
		}
	}
	return n, mine, rows.Err()
}
