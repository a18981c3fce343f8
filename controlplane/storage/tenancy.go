// Tenancy storage (docs/controlplane.md, "Targeting"): tenants, principals with their own API
// tokens (stored hashed), role bindings, projects with stages, the labels and namespace targets
// of a tenant's environments. The decisions are controlplane/targeting's.

package storage

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nexo-io/nexo-edge/contract/protocol"
	"github.com/nexo-io/nexo-edge/controlplane/targeting"
)

// Tenant owns principals, projects and environments.
type Tenant struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

// Principal is a person or a pipeline with its own API token.
type Principal struct {
	ID       string    `json:"id"`
	Tenant   string    `json:"tenant"`
	Name     string    `json:"name"`
	Bindings []Binding `json:"bindings,omitempty"`
	Created  time.Time `json:"created"`
	// TokenExpiresAt is when its token stops working (a tenant admin rotates it).
	TokenExpiresAt time.Time `json:"tokenExpiresAt"`
}

// Binding gives a principal a role: tenant-wide (tenant admin) or in one project.
type Binding struct {
	Role    targeting.Role `json:"role"`
	Project string         `json:"project,omitempty"`
}

// ErrConflict is returned for a name already taken.
var ErrConflict = errors.New("already exists")

func tokenHash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// conflictOr maps a uniqueness violation to ErrConflict.
func conflictOr(err error) error {
	if err != nil && strings.Contains(err.Error(), "UNIQUE constraint") {
		return ErrConflict
	}
	return err
}

// CreateTenant stores a tenant.
func (s *Store) CreateTenant(ctx context.Context, id, name string) error {
	_, err := s.q(ctx).ExecContext(ctx, `INSERT INTO tenants(id, name, created) VALUES(?,?,?)`, id, name, now())
	return conflictOr(err)
}

// TenantByID returns a tenant.
func (s *Store) TenantByID(ctx context.Context, id string) (Tenant, error) {
	var t Tenant
	err := s.q(ctx).QueryRowContext(ctx, `SELECT id, name FROM tenants WHERE id = ?`, id).Scan(&t.ID, &t.Name)
	if errors.Is(err, sql.ErrNoRows) {
		return t, ErrNotFound
	}
	return t, err
}

// CreatePrincipal stores a principal of a tenant with the hash of its token, valid until expires.
func (s *Store) CreatePrincipal(ctx context.Context, id, tenant, name, token string, expires time.Time) error {
	_, err := s.q(ctx).ExecContext(ctx, `INSERT INTO principals(id, tenant_id, name, token_hash, created, token_expires) VALUES(?,?,?,?,?,?)`,
		id, tenant, name, tokenHash(token), now(), expires.UTC().Format(time.RFC3339Nano))
	return conflictOr(err)
}

const principalColumns = `SELECT id, tenant_id, name, created, token_expires FROM principals`

// PrincipalByToken returns the principal a token belongs to, with its bindings. An expired
// token is returned too: the caller refuses it, naming the expiry.
func (s *Store) PrincipalByToken(ctx context.Context, token string) (Principal, error) {
	return s.principal(ctx, principalColumns+` WHERE token_hash = ?`, tokenHash(token))
}

// PrincipalByName returns a tenant's principal by name.
func (s *Store) PrincipalByName(ctx context.Context, tenant, name string) (Principal, error) {
	return s.principal(ctx, principalColumns+` WHERE tenant_id = ? AND name = ?`, tenant, name)
}

func (s *Store) principal(ctx context.Context, q string, args ...any) (Principal, error) {
	var p Principal
	var created, expires string
	err := s.q(ctx).QueryRowContext(ctx, q, args...).Scan(&p.ID, &p.Tenant, &p.Name, &created, &expires)
	if errors.Is(err, sql.ErrNoRows) {
		return p, ErrNotFound
	}
	if err != nil {
		return p, err
	}
	p.Created, p.TokenExpiresAt = parseTime(created), parseTime(expires)
	p.Bindings, err = s.bindings(ctx, p.ID)
	return p, err
}

func (s *Store) bindings(ctx context.Context, principalID string) ([]Binding, error) {
	rows, err := s.q(ctx).QueryContext(ctx, `SELECT role, project FROM role_bindings WHERE principal_id = ? ORDER BY role, project`, principalID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Binding
	for rows.Next() {
		var b Binding
		if err := rows.Scan(&b.Role, &b.Project); err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, rows.Err()
}

// Principals lists a tenant's principals with their bindings, by name.
func (s *Store) Principals(ctx context.Context, tenant string) ([]Principal, error) {
	rows, err := s.q(ctx).QueryContext(ctx, `SELECT name FROM principals WHERE tenant_id = ? ORDER BY name`, tenant)
	if err != nil {
		return nil, err
	}
	var names []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			rows.Close()
			return nil, err
		}
		names = append(names, n)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := []Principal{}
	for _, n := range names {
		p, err := s.PrincipalByName(ctx, tenant, n)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// DeletePrincipal removes a principal and its bindings: its token is refused from the next
// request on.
func (s *Store) DeletePrincipal(ctx context.Context, id string) error {
	if _, err := s.q(ctx).ExecContext(ctx, `DELETE FROM role_bindings WHERE principal_id = ?`, id); err != nil {
		return err
	}
	res, err := s.q(ctx).ExecContext(ctx, `DELETE FROM principals WHERE id = ?`, id)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrNotFound
	}
	return nil
}

// RotatePrincipalToken replaces a principal's token: the old one is refused from the next
// request on.
func (s *Store) RotatePrincipalToken(ctx context.Context, id, token string, expires time.Time) error {
	res, err := s.q(ctx).ExecContext(ctx, `UPDATE principals SET token_hash = ?, token_expires = ? WHERE id = ?`,
		tokenHash(token), expires.UTC().Format(time.RFC3339Nano), id)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrNotFound
	}
	return nil
}

// Bind gives a principal a role (idempotent).
func (s *Store) Bind(ctx context.Context, principalID string, b Binding) error {
	_, err := s.q(ctx).ExecContext(ctx, `INSERT OR IGNORE INTO role_bindings(principal_id, role, project) VALUES(?,?,?)`, principalID, b.Role, b.Project)
	return err
}

// Unbind removes a principal's role; ErrNotFound when it does not hold it.
func (s *Store) Unbind(ctx context.Context, principalID string, b Binding) error {
	res, err := s.q(ctx).ExecContext(ctx, `DELETE FROM role_bindings WHERE principal_id = ? AND role = ? AND project = ?`, principalID, b.Role, b.Project)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return ErrNotFound
	}
	return nil
}

// CreateProject stores a project of a tenant.
func (s *Store) CreateProject(ctx context.Context, tenant, name string) error {
	_, err := s.q(ctx).ExecContext(ctx, `INSERT INTO projects(tenant_id, name, created) VALUES(?,?,?)`, tenant, name, now())
	return conflictOr(err)
}

// ProjectExists reports whether a tenant has the project.
func (s *Store) ProjectExists(ctx context.Context, tenant, name string) (bool, error) {
	var n int
	err := s.q(ctx).QueryRowContext(ctx, `SELECT COUNT(*) FROM projects WHERE tenant_id = ? AND name = ?`, tenant, name).Scan(&n)
	return n > 0, err
}

// StoredStage is a stage with whether a tenant admin let it share namespace targets with
// other projects.
type StoredStage struct {
	targeting.Stage
	Shared bool
	// Promotion is where the stage takes its revisions from, if anywhere (changes.go).
	Promotion Promotion
}

// Promotion is a stage's promotion policy: the stage it promotes from ("" for none), how long
// a revision must have been Synced on every target of that stage, and whether a project
// manager other than the promoter must approve.
type Promotion struct {
	From             string `json:"from,omitempty"`
	SoakSeconds      int64  `json:"soakSeconds,omitempty"`
	RequiresApproval bool   `json:"requiresApproval,omitempty"`
}

// SetStage creates or replaces a project's stage.
func (s *Store) SetStage(ctx context.Context, tenant string, st StoredStage) error {
	envs, _ := json.Marshal(st.Environments)
	nss, _ := json.Marshal(st.NamespaceTargets)
	_, err := s.q(ctx).ExecContext(ctx, `INSERT INTO stages(tenant_id, project, name, environments, namespaces, shared, promotes_from, soak_seconds, requires_approval) VALUES(?,?,?,?,?,?,?,?,?)
		ON CONFLICT(tenant_id, project, name) DO UPDATE SET environments = excluded.environments, namespaces = excluded.namespaces, shared = excluded.shared,
		promotes_from = excluded.promotes_from, soak_seconds = excluded.soak_seconds, requires_approval = excluded.requires_approval`,
		tenant, st.Project, st.Name, string(envs), string(nss), st.Shared, st.Promotion.From, st.Promotion.SoakSeconds, st.Promotion.RequiresApproval)
	return err
}

// Stage returns a project's stage.
func (s *Store) Stage(ctx context.Context, tenant, project, name string) (StoredStage, error) {
	all, err := s.stages(ctx, `WHERE tenant_id = ? AND project = ? AND name = ?`, tenant, project, name)
	if err != nil {
		return StoredStage{}, err
	}
	if len(all) == 0 {
		return StoredStage{}, ErrNotFound
	}
	return all[0], nil
}

// Stages lists a tenant's stages, by project and name.
func (s *Store) Stages(ctx context.Context, tenant string) ([]StoredStage, error) {
	return s.stages(ctx, `WHERE tenant_id = ?`, tenant)
}

func (s *Store) stages(ctx context.Context, where string, args ...any) ([]StoredStage, error) {
	rows, err := s.q(ctx).QueryContext(ctx, `SELECT project, name, environments, namespaces, shared, promotes_from, soak_seconds, requires_approval FROM stages `+where+` ORDER BY project, name`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []StoredStage
	for rows.Next() {
		var st StoredStage
		var envs, nss string
		if err := rows.Scan(&st.Project, &st.Name, &envs, &nss, &st.Shared, &st.Promotion.From, &st.Promotion.SoakSeconds, &st.Promotion.RequiresApproval); err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(envs), &st.Environments); err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(nss), &st.NamespaceTargets); err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, rows.Err()
}

// AssignEnvironment makes an environment the tenant's.
func (s *Store) AssignEnvironment(ctx context.Context, envID, tenant string) error {
	_, err := s.q(ctx).ExecContext(ctx, `INSERT INTO environment_tenancy(env_id, tenant_id) VALUES(?,?)`, envID, tenant)
	return conflictOr(err)
}

// EnvironmentTenant returns the tenant an environment belongs to ("" when none).
func (s *Store) EnvironmentTenant(ctx context.Context, envID string) (string, error) {
	var t string
	err := s.q(ctx).QueryRowContext(ctx, `SELECT tenant_id FROM environment_tenancy WHERE env_id = ?`, envID).Scan(&t)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return t, err
}

// SetEnvironmentLabels replaces an environment's labels.
func (s *Store) SetEnvironmentLabels(ctx context.Context, envID string, labels map[string]string) error {
	raw, _ := json.Marshal(labels)
	_, err := s.q(ctx).ExecContext(ctx, `UPDATE environment_tenancy SET labels = ? WHERE env_id = ?`, string(raw), envID)
	return err
}

// SetNamespaceTarget creates or replaces a namespace target of an environment.
func (s *Store) SetNamespaceTarget(ctx context.Context, envID, namespace string, labels map[string]string) error {
	raw, _ := json.Marshal(labels)
	_, err := s.q(ctx).ExecContext(ctx, `INSERT INTO namespace_targets(env_id, namespace, labels) VALUES(?,?,?)
		ON CONFLICT(env_id, namespace) DO UPDATE SET labels = excluded.labels`, envID, namespace, string(raw))
	return err
}

// TenantEnvironments returns a tenant's environments as targeting reads them: labels, namespace
// targets and the limits their clusters last reported.
func (s *Store) TenantEnvironments(ctx context.Context, tenant string) ([]targeting.Environment, error) {
	rows, err := s.q(ctx).QueryContext(ctx, `SELECT t.env_id, t.labels, COALESCE(h.body, '') FROM environment_tenancy t
		LEFT JOIN heartbeats h ON h.env_id = t.env_id WHERE t.tenant_id = ? ORDER BY t.env_id`, tenant)
	if err != nil {
		return nil, err
	}
	var out []targeting.Environment
	index := map[string]int{}
	for rows.Next() {
		var id, labels, hb string
		if err := rows.Scan(&id, &labels, &hb); err != nil {
			rows.Close()
			return nil, err
		}
		e := targeting.Environment{ID: id, Tenant: tenant}
		if err := json.Unmarshal([]byte(labels), &e.Labels); err != nil {
			rows.Close()
			return nil, fmt.Errorf("environment %s labels: %w", id, err)
		}
		e.Limits = reportedLimits(hb)
		index[id] = len(out)
		out = append(out, e)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	trows, err := s.q(ctx).QueryContext(ctx, `SELECT n.env_id, n.namespace, n.labels FROM namespace_targets n
		JOIN environment_tenancy t ON t.env_id = n.env_id WHERE t.tenant_id = ? ORDER BY n.env_id, n.namespace`, tenant)
	if err != nil {
		return nil, err
	}
	defer trows.Close()
	for trows.Next() {
		var env string
		nt := targeting.NamespaceTarget{}
		var labels string
		if err := trows.Scan(&env, &nt.Namespace, &labels); err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(labels), &nt.Labels); err != nil {
			return nil, err
		}
		if i, ok := index[env]; ok {
			out[i].Targets = append(out[i].Targets, nt)
		}
	}
	return out, trows.Err()
}

// reportedLimits are the limits of a stored heartbeat body (nil when it reports none).
func reportedLimits(body string) *protocol.Limits {
	if body == "" {
		return nil
	}
	var hb protocol.Heartbeat
	if json.Unmarshal([]byte(body), &hb) != nil {
		return nil
	}
	return hb.Limits
}

// Principal token lifetimes: a token expires, and a tenant admin rotates it.
const (
	DefaultPrincipalTokenLifetime = 90 * 24 * time.Hour
	MaxPrincipalTokenLifetime     = 366 * 24 * time.Hour
)
