// The schema, in one place: every table, and the columns added to a table after it was first
// released (migrate adds them to a database an earlier version made).

package storage

import (
	"database/sql"
	"fmt"
	"time"
)

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
-- command_proxies are the NexoProxies a command carries; where claims is 1 (a command type that
-- counts against the entitlement, protocol.Commands) they count while the command is pending or
-- delivered (entitlement.go).
CREATE TABLE IF NOT EXISTS command_proxies (
  command_id TEXT NOT NULL, env_id TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL,
  PRIMARY KEY (command_id, namespace, name));
CREATE TABLE IF NOT EXISTS desired (
  env_id TEXT NOT NULL, kind TEXT NOT NULL, namespace TEXT NOT NULL, name TEXT NOT NULL,
  manifest TEXT NOT NULL, PRIMARY KEY (env_id, kind, namespace, name));
`

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
	// Every command that recorded proxies before this column was one that claims them.
	{"command_proxies", "claims", "INTEGER NOT NULL DEFAULT 1"},
	// The capabilities of the environment's last heartbeat, a JSON list (protocol.Heartbeat).
	{"heartbeats", "capabilities", "TEXT NOT NULL DEFAULT '[]'"},
	// A stage's promotion policy (storage.Promotion).
	{"stages", "promotes_from", "TEXT NOT NULL DEFAULT ''"},
	{"stages", "soak_seconds", "INTEGER NOT NULL DEFAULT 0"},
	{"stages", "requires_approval", "INTEGER NOT NULL DEFAULT 0"},
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

const tenancySchema = `
CREATE TABLE IF NOT EXISTS tenants (id TEXT PRIMARY KEY, name TEXT NOT NULL UNIQUE, created TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS principals (
  id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL REFERENCES tenants(id), name TEXT NOT NULL,
  token_hash TEXT NOT NULL UNIQUE, created TEXT NOT NULL, UNIQUE (tenant_id, name));
CREATE TABLE IF NOT EXISTS role_bindings (
  principal_id TEXT NOT NULL REFERENCES principals(id), role TEXT NOT NULL, project TEXT NOT NULL DEFAULT '',
  PRIMARY KEY (principal_id, role, project));
CREATE TABLE IF NOT EXISTS projects (
  tenant_id TEXT NOT NULL REFERENCES tenants(id), name TEXT NOT NULL, created TEXT NOT NULL, PRIMARY KEY (tenant_id, name));
CREATE TABLE IF NOT EXISTS stages (
  tenant_id TEXT NOT NULL, project TEXT NOT NULL, name TEXT NOT NULL, environments TEXT NOT NULL, namespaces TEXT NOT NULL,
  PRIMARY KEY (tenant_id, project, name), FOREIGN KEY (tenant_id, project) REFERENCES projects(tenant_id, name));
-- The tenant of an environment and the labels its tenant admin set (never taken from heartbeats).
CREATE TABLE IF NOT EXISTS environment_tenancy (
  env_id TEXT PRIMARY KEY REFERENCES environments(id), tenant_id TEXT NOT NULL REFERENCES tenants(id), labels TEXT NOT NULL DEFAULT '{}');
CREATE TABLE IF NOT EXISTS namespace_targets (
  env_id TEXT NOT NULL REFERENCES environments(id), namespace TEXT NOT NULL, labels TEXT NOT NULL, PRIMARY KEY (env_id, namespace));
`

const auditSchema = `
CREATE TABLE IF NOT EXISTS audit (
  seq INTEGER PRIMARY KEY AUTOINCREMENT, at TEXT NOT NULL, tenant TEXT NOT NULL DEFAULT '',
  actor TEXT NOT NULL, role TEXT NOT NULL, action TEXT NOT NULL, target TEXT NOT NULL,
  decision TEXT NOT NULL, reason TEXT NOT NULL, command_id TEXT NOT NULL,
  prev_hash TEXT NOT NULL, hash TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS audit_actor ON audit(actor, seq);
CREATE INDEX IF NOT EXISTS audit_action ON audit(action, seq);
CREATE INDEX IF NOT EXISTS audit_target ON audit(target, seq);
CREATE INDEX IF NOT EXISTS audit_command ON audit(command_id, seq);
CREATE INDEX IF NOT EXISTS audit_tenant ON audit(tenant, seq);
CREATE TRIGGER IF NOT EXISTS audit_no_update BEFORE UPDATE ON audit
  BEGIN SELECT RAISE(ABORT, 'the audit history is append-only: records cannot be changed'); END;
CREATE TRIGGER IF NOT EXISTS audit_no_delete BEFORE DELETE ON audit
  BEGIN SELECT RAISE(ABORT, 'the audit history is append-only: records cannot be deleted'); END;
`

// changesSchema holds change management (changes.go): a project's numbered revisions, what
// each stage deployed where (and when it became Synced there), the answers of previews and the
// predictions of deploys, freezes, promotions and their approvals.
const changesSchema = `
CREATE TABLE IF NOT EXISTS revisions (
  tenant_id TEXT NOT NULL, project TEXT NOT NULL, number INTEGER NOT NULL, author TEXT NOT NULL,
  message TEXT NOT NULL, created TEXT NOT NULL, digest TEXT NOT NULL, manifests TEXT NOT NULL,
  PRIMARY KEY (tenant_id, project, number));
CREATE TABLE IF NOT EXISTS stage_deployments (
  seq INTEGER PRIMARY KEY AUTOINCREMENT, tenant_id TEXT NOT NULL, project TEXT NOT NULL, stage TEXT NOT NULL,
  env_id TEXT NOT NULL, revision INTEGER NOT NULL, command_id TEXT NOT NULL UNIQUE, via TEXT NOT NULL,
  promotion_id TEXT NOT NULL DEFAULT '', created TEXT NOT NULL, synced_since TEXT NOT NULL DEFAULT '',
  first_synced TEXT NOT NULL DEFAULT '');
CREATE INDEX IF NOT EXISTS stage_deployments_stage ON stage_deployments(tenant_id, project, stage, env_id, seq);
CREATE INDEX IF NOT EXISTS stage_deployments_env ON stage_deployments(env_id, seq);
CREATE TABLE IF NOT EXISTS command_results (command_id TEXT PRIMARY KEY, body TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS previews (
  command_id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, project TEXT NOT NULL, stage TEXT NOT NULL,
  env_id TEXT NOT NULL, revision INTEGER NOT NULL, inventory_digest TEXT NOT NULL, created TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS freezes (
  tenant_id TEXT NOT NULL, scope TEXT NOT NULL, target TEXT NOT NULL, reason TEXT NOT NULL,
  until TEXT NOT NULL DEFAULT '', by TEXT NOT NULL, created TEXT NOT NULL, PRIMARY KEY (tenant_id, scope, target));
CREATE TABLE IF NOT EXISTS promotions (
  id TEXT PRIMARY KEY, tenant_id TEXT NOT NULL, project TEXT NOT NULL, from_stage TEXT NOT NULL,
  to_stage TEXT NOT NULL, revision INTEGER NOT NULL, promoter TEXT NOT NULL, state TEXT NOT NULL,
  created TEXT NOT NULL, message TEXT NOT NULL DEFAULT '');
CREATE TABLE IF NOT EXISTS promotion_approvals (
  promotion_id TEXT NOT NULL, approver TEXT NOT NULL, at TEXT NOT NULL, PRIMARY KEY (promotion_id, approver));
`

const entitlementSchema = `
CREATE TABLE IF NOT EXISTS entitlements (
  tenant_id TEXT PRIMARY KEY REFERENCES tenants(id), max_proxies INTEGER NOT NULL CHECK (max_proxies >= 0), expires_at TEXT NOT NULL);
`
