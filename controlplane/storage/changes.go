// Change management (docs/controlplane.md, "Change management"): a project's numbered, immutable
// revisions; what each stage deployed to each environment, and since when it runs there
// (Synced); the answers previews and deploys brought back; freezes; promotions and approvals.

package storage

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"
)

// Revision is one numbered, immutable set of a project's manifests.
type Revision struct {
	Number  int64     `json:"number"`
	Author  string    `json:"author"`
	Message string    `json:"message"`
	Created time.Time `json:"created"`
	// Digest is the sha256 of the manifests' canonical JSON.
	Digest string `json:"digest"`
	// Manifests is a JSON array of the objects, unsigned.
	Manifests string `json:"-"`
}

// CreateRevision stores the project's next revision and returns it numbered.
func (s *Store) CreateRevision(ctx context.Context, tenant, project string, r Revision) (Revision, error) {
	ctx, tx, commit, done, err := s.begin(ctx)
	if err != nil {
		return r, err
	}
	defer done()
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(number), 0) + 1 FROM revisions WHERE tenant_id = ? AND project = ?`, tenant, project).Scan(&r.Number); err != nil {
		return r, err
	}
	r.Created = time.Now().UTC()
	if _, err := tx.ExecContext(ctx, `INSERT INTO revisions(tenant_id, project, number, author, message, created, digest, manifests) VALUES(?,?,?,?,?,?,?,?)`,
		tenant, project, r.Number, r.Author, r.Message, r.Created.Format(time.RFC3339Nano), r.Digest, r.Manifests); err != nil {
		return r, err
	}
	return r, commit()
}

// Revisions lists a project's revisions, newest first, without their manifests.
func (s *Store) Revisions(ctx context.Context, tenant, project string) ([]Revision, error) {
	rows, err := s.q(ctx).QueryContext(ctx, `SELECT number, author, message, created, digest FROM revisions WHERE tenant_id = ? AND project = ? ORDER BY number DESC`, tenant, project)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []Revision{}
	for rows.Next() {
		var r Revision
		var created string
		if err := rows.Scan(&r.Number, &r.Author, &r.Message, &created, &r.Digest); err != nil {
			return nil, err
		}
		r.Created = parseTime(created)
		out = append(out, r)
	}
	return out, rows.Err()
}

// RevisionByNumber returns one revision with its manifests (ErrNotFound when there is none).
func (s *Store) RevisionByNumber(ctx context.Context, tenant, project string, n int64) (Revision, error) {
	r := Revision{Number: n}
	var created string
	err := s.q(ctx).QueryRowContext(ctx, `SELECT author, message, created, digest, manifests FROM revisions WHERE tenant_id = ? AND project = ? AND number = ?`,
		tenant, project, n).Scan(&r.Author, &r.Message, &created, &r.Digest, &r.Manifests)
	if errors.Is(err, sql.ErrNoRows) {
		return r, ErrNotFound
	}
	r.Created = parseTime(created)
	return r, err
}

// Ways a revision reaches a stage's environment.
const (
	ViaDeploy    = "deploy"
	ViaRollback  = "rollback"
	ViaPromotion = "promotion"
)

// StageDeployment is one revision queued through a stage to one environment, with its
// command's state.
type StageDeployment struct {
	Tenant      string    `json:"-"`
	Project     string    `json:"project"`
	Stage       string    `json:"stage"`
	Environment string    `json:"environment"`
	Revision    int64     `json:"revision"`
	CommandID   string    `json:"commandId"`
	Via         string    `json:"via"`
	PromotionID string    `json:"promotionId,omitempty"`
	Created     time.Time `json:"created"`
	// Command is the deploy command's state and message (joined from the queue).
	Command        CommandState `json:"commandStatus"`
	CommandMessage string       `json:"commandMessage,omitempty"`
	// SyncedSince is when the environment was first seen running the revision (every proxy on
	// the graph revision the deploy predicted, rolled out and Ready); nil while it is not.
	SyncedSince *time.Time `json:"syncedSince,omitempty"`
}

// RecordStageDeployment records a revision queued through a stage (in the queueing
// transaction).
func (s *Store) RecordStageDeployment(ctx context.Context, d StageDeployment) error {
	_, err := s.q(ctx).ExecContext(ctx, `INSERT INTO stage_deployments(tenant_id, project, stage, env_id, revision, command_id, via, promotion_id, created) VALUES(?,?,?,?,?,?,?,?,?)`,
		d.Tenant, d.Project, d.Stage, d.Environment, d.Revision, d.CommandID, d.Via, d.PromotionID, now())
	return err
}

const stageDeploymentColumns = `d.tenant_id, d.project, d.stage, d.env_id, d.revision, d.command_id, d.via, d.promotion_id, d.created, d.synced_since, c.status, c.message`

func scanStageDeployments(rows *sql.Rows, err error) ([]StageDeployment, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []StageDeployment{}
	for rows.Next() {
		var d StageDeployment
		var created, synced string
		if err := rows.Scan(&d.Tenant, &d.Project, &d.Stage, &d.Environment, &d.Revision, &d.CommandID, &d.Via, &d.PromotionID, &created, &synced, &d.Command, &d.CommandMessage); err != nil {
			return nil, err
		}
		d.Created = parseTime(created)
		if synced != "" {
			t := parseTime(synced)
			d.SyncedSince = &t
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// LatestStageDeployments returns, per environment, the last revision queued through the stage
// (the one desired there).
func (s *Store) LatestStageDeployments(ctx context.Context, tenant, project, stage string) ([]StageDeployment, error) {
	return scanStageDeployments(s.q(ctx).QueryContext(ctx, `SELECT `+stageDeploymentColumns+` FROM stage_deployments d JOIN commands c ON c.id = d.command_id
		WHERE d.seq IN (SELECT MAX(seq) FROM stage_deployments WHERE tenant_id = ? AND project = ? AND stage = ? GROUP BY env_id) ORDER BY d.env_id`, tenant, project, stage))
}

// EnvironmentStageDeployments returns, per stage, the last revision queued to the environment.
func (s *Store) EnvironmentStageDeployments(ctx context.Context, envID string) ([]StageDeployment, error) {
	return scanStageDeployments(s.q(ctx).QueryContext(ctx, `SELECT `+stageDeploymentColumns+` FROM stage_deployments d JOIN commands c ON c.id = d.command_id
		WHERE d.seq IN (SELECT MAX(seq) FROM stage_deployments WHERE env_id = ? GROUP BY tenant_id, project, stage) ORDER BY d.seq`, envID))
}

// PromotionDeployments returns the deployments a promotion queued.
func (s *Store) PromotionDeployments(ctx context.Context, promotionID string) ([]StageDeployment, error) {
	return scanStageDeployments(s.q(ctx).QueryContext(ctx, `SELECT `+stageDeploymentColumns+` FROM stage_deployments d JOIN commands c ON c.id = d.command_id
		WHERE d.promotion_id = ? ORDER BY d.env_id`, promotionID))
}

// RevisionApplied reports whether revision n of the project was ever applied in the
// environment (through any of its stages).
func (s *Store) RevisionApplied(ctx context.Context, tenant, project, envID string, n int64) (bool, error) {
	var count int
	err := s.q(ctx).QueryRowContext(ctx, `SELECT COUNT(*) FROM stage_deployments d JOIN commands c ON c.id = d.command_id
		WHERE d.tenant_id = ? AND d.project = ? AND d.env_id = ? AND d.revision = ? AND c.status = ?`, tenant, project, envID, n, CommandApplied).Scan(&count)
	return count > 0, err
}

// SetSyncedSince records (t non-nil) or clears when a stage deployment became Synced; the first
// time it was Synced is kept either way.
func (s *Store) SetSyncedSince(ctx context.Context, commandID string, t *time.Time) error {
	v := ""
	if t != nil {
		v = t.UTC().Format(time.RFC3339Nano)
	}
	_, err := s.q(ctx).ExecContext(ctx, `UPDATE stage_deployments SET synced_since = ?,
		first_synced = CASE WHEN first_synced = '' THEN ? ELSE first_synced END WHERE command_id = ?`, v, v, commandID)
	return err
}

// RunningRevision is the revision of the stage's last deployment to the environment that was
// ever Synced there (0 when none): what runs while a newer one is still on its way.
func (s *Store) RunningRevision(ctx context.Context, tenant, project, stage, envID string) (int64, error) {
	var n int64
	err := s.q(ctx).QueryRowContext(ctx, `SELECT revision FROM stage_deployments WHERE tenant_id = ? AND project = ? AND stage = ? AND env_id = ?
		AND first_synced != '' ORDER BY seq DESC LIMIT 1`, tenant, project, stage, envID).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	return n, err
}

// SetCommandResult keeps what a command's acknowledgement brought back (a preview's answer, a
// deploy's prediction), JSON.
func (s *Store) SetCommandResult(ctx context.Context, commandID, body string) error {
	_, err := s.q(ctx).ExecContext(ctx, `INSERT INTO command_results(command_id, body) VALUES(?,?) ON CONFLICT(command_id) DO UPDATE SET body = excluded.body`, commandID, body)
	return err
}

// ResultsSince returns, oldest first, what the applied commands of the given types in the
// environment from the command id on (itself included) brought back: a later rollout's
// prediction supersedes a deploy's for the proxies it re-signed.
func (s *Store) ResultsSince(ctx context.Context, envID, id string, types []string) ([]string, error) {
	args := []any{envID, CommandApplied, id}
	marks := make([]string, len(types))
	for i, t := range types {
		marks[i], args = "?", append(args, t)
	}
	rows, err := s.q(ctx).QueryContext(ctx, `SELECT r.body FROM command_results r JOIN commands c ON c.id = r.command_id
		WHERE c.env_id = ? AND c.status = ? AND c.seq >= (SELECT seq FROM commands WHERE id = ?) AND c.type IN (`+strings.Join(marks, ",")+`) ORDER BY c.seq`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var body string
		if err := rows.Scan(&body); err != nil {
			return nil, err
		}
		out = append(out, body)
	}
	return out, rows.Err()
}

// CommandResult returns what a command's acknowledgement brought back ("" when nothing).
func (s *Store) CommandResult(ctx context.Context, commandID string) (string, error) {
	var body string
	err := s.q(ctx).QueryRowContext(ctx, `SELECT body FROM command_results WHERE command_id = ?`, commandID).Scan(&body)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return body, err
}

// PreviewRecord is a preview queued through a stage.
type PreviewRecord struct {
	ID          string `json:"id"`
	Tenant      string `json:"-"`
	Project     string `json:"project"`
	Stage       string `json:"stage"`
	Environment string `json:"environment"`
	Revision    int64  `json:"revision"`
	// InventoryDigest is the environment's inventory when the preview was queued.
	InventoryDigest string       `json:"-"`
	Created         time.Time    `json:"created"`
	Command         CommandState `json:"status"`
	CommandMessage  string       `json:"message,omitempty"`
	Seq             int64        `json:"-"`
}

// RecordPreview records a preview queued through a stage.
func (s *Store) RecordPreview(ctx context.Context, p PreviewRecord) error {
	_, err := s.q(ctx).ExecContext(ctx, `INSERT INTO previews(command_id, tenant_id, project, stage, env_id, revision, inventory_digest, created) VALUES(?,?,?,?,?,?,?,?)`,
		p.ID, p.Tenant, p.Project, p.Stage, p.Environment, p.Revision, p.InventoryDigest, now())
	return err
}

const previewColumns = `p.command_id, p.tenant_id, p.project, p.stage, p.env_id, p.revision, p.inventory_digest, p.created, c.status, c.message, c.seq`

func scanPreview(row *sql.Row) (PreviewRecord, error) {
	var p PreviewRecord
	var created string
	err := row.Scan(&p.ID, &p.Tenant, &p.Project, &p.Stage, &p.Environment, &p.Revision, &p.InventoryDigest, &created, &p.Command, &p.CommandMessage, &p.Seq)
	if errors.Is(err, sql.ErrNoRows) {
		return p, ErrNotFound
	}
	p.Created = parseTime(created)
	return p, err
}

// PreviewByID returns one of the project's previews.
func (s *Store) PreviewByID(ctx context.Context, tenant, project, id string) (PreviewRecord, error) {
	return scanPreview(s.q(ctx).QueryRowContext(ctx, `SELECT `+previewColumns+` FROM previews p JOIN commands c ON c.id = p.command_id
		WHERE p.tenant_id = ? AND p.project = ? AND p.command_id = ?`, tenant, project, id))
}

// LatestPreview returns the last answered preview of a revision in an environment.
func (s *Store) LatestPreview(ctx context.Context, tenant, project, envID string, revision int64) (PreviewRecord, error) {
	return scanPreview(s.q(ctx).QueryRowContext(ctx, `SELECT `+previewColumns+` FROM previews p JOIN commands c ON c.id = p.command_id
		WHERE p.tenant_id = ? AND p.project = ? AND p.env_id = ? AND p.revision = ? AND c.status = ? ORDER BY c.seq DESC LIMIT 1`, tenant, project, envID, revision, CommandApplied))
}

// InventoryDigest is the digest of the environment's stored inventory (protocol.EmptyInventory's
// when none).
func (s *Store) InventoryDigest(ctx context.Context, envID string) (string, error) {
	var d string
	err := s.q(ctx).QueryRowContext(ctx, `SELECT digest FROM inventory_digest WHERE env_id = ?`, envID).Scan(&d)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	return d, err
}

// ChangedSince reports whether a command other than previews was applied in the environment
// after the command at seq.
func (s *Store) ChangedSince(ctx context.Context, envID string, seq int64, preview string) (bool, error) {
	var n int
	err := s.q(ctx).QueryRowContext(ctx, `SELECT COUNT(*) FROM commands WHERE env_id = ? AND seq > ? AND type != ? AND status = ?`,
		envID, seq, preview, CommandApplied).Scan(&n)
	return n > 0, err
}

// Freeze refuses new change to an environment or a stage.
type Freeze struct {
	Tenant string `json:"-"`
	// Scope is "environment" (Target an environment id) or "stage" (Target project/stage).
	Scope   string     `json:"scope"`
	Target  string     `json:"target"`
	Reason  string     `json:"reason"`
	Until   *time.Time `json:"until,omitempty"`
	By      string     `json:"by"`
	Created time.Time  `json:"created"`
}

// Freeze scopes.
const (
	FreezeEnvironment = "environment"
	FreezeStage       = "stage"
)

// SetFreeze creates or replaces a freeze.
func (s *Store) SetFreeze(ctx context.Context, f Freeze) error {
	until := ""
	if f.Until != nil {
		until = f.Until.UTC().Format(time.RFC3339Nano)
	}
	_, err := s.q(ctx).ExecContext(ctx, `INSERT INTO freezes(tenant_id, scope, target, reason, until, by, created) VALUES(?,?,?,?,?,?,?)
		ON CONFLICT(tenant_id, scope, target) DO UPDATE SET reason = excluded.reason, until = excluded.until, by = excluded.by, created = excluded.created`,
		f.Tenant, f.Scope, f.Target, f.Reason, until, f.By, now())
	return err
}

// LiftFreeze removes a freeze and reports whether there was one.
func (s *Store) LiftFreeze(ctx context.Context, tenant, scope, target string) (bool, error) {
	res, err := s.q(ctx).ExecContext(ctx, `DELETE FROM freezes WHERE tenant_id = ? AND scope = ? AND target = ?`, tenant, scope, target)
	if err != nil {
		return false, err
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

// Freezes lists the tenant's freezes in force at t (a freeze past its end is over).
func (s *Store) Freezes(ctx context.Context, tenant string, t time.Time) ([]Freeze, error) {
	rows, err := s.q(ctx).QueryContext(ctx, `SELECT scope, target, reason, until, by, created FROM freezes WHERE tenant_id = ? ORDER BY scope, target`, tenant)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []Freeze{}
	for rows.Next() {
		f := Freeze{Tenant: tenant}
		var until, created string
		if err := rows.Scan(&f.Scope, &f.Target, &f.Reason, &until, &f.By, &created); err != nil {
			return nil, err
		}
		f.Created = parseTime(created)
		if until != "" {
			u := parseTime(until)
			if !t.Before(u) {
				continue
			}
			f.Until = &u
		}
		out = append(out, f)
	}
	return out, rows.Err()
}

// PromotionRecord is one promotion of a revision from a stage to the next.
type PromotionRecord struct {
	ID        string     `json:"id"`
	Tenant    string     `json:"-"`
	Project   string     `json:"project"`
	From      string     `json:"from"`
	To        string     `json:"to"`
	Revision  int64      `json:"revision"`
	Promoter  string     `json:"promoter"`
	State     string     `json:"state"`
	Message   string     `json:"message,omitempty"`
	Created   time.Time  `json:"created"`
	Approvals []Approval `json:"approvals"`
	// Targets are the deploys it queued, one per environment of the stage it promotes to.
	Targets []StageDeployment `json:"targets"`
}

// Approval is a project manager's approval of a promotion.
type Approval struct {
	Approver string    `json:"approver"`
	At       time.Time `json:"at"`
}

// Promotion states.
const (
	PromotionAwaitingApproval = "awaiting-approval"
	PromotionQueued           = "queued"
)

// CreatePromotion records a promotion.
func (s *Store) CreatePromotion(ctx context.Context, p PromotionRecord) error {
	_, err := s.q(ctx).ExecContext(ctx, `INSERT INTO promotions(id, tenant_id, project, from_stage, to_stage, revision, promoter, state, created, message) VALUES(?,?,?,?,?,?,?,?,?,?)`,
		p.ID, p.Tenant, p.Project, p.From, p.To, p.Revision, p.Promoter, p.State, now(), p.Message)
	return err
}

// SetPromotionState moves a promotion on.
func (s *Store) SetPromotionState(ctx context.Context, id, state, message string) error {
	_, err := s.q(ctx).ExecContext(ctx, `UPDATE promotions SET state = ?, message = ? WHERE id = ?`, state, message, id)
	return err
}

// Approve records an approval of a promotion.
func (s *Store) Approve(ctx context.Context, id, approver string) error {
	_, err := s.q(ctx).ExecContext(ctx, `INSERT OR IGNORE INTO promotion_approvals(promotion_id, approver, at) VALUES(?,?,?)`, id, approver, now())
	return err
}

// PromotionByID returns one of the project's promotions with its approvals and deploys.
func (s *Store) PromotionByID(ctx context.Context, tenant, project, id string) (PromotionRecord, error) {
	all, err := s.promotions(ctx, `WHERE tenant_id = ? AND project = ? AND id = ?`, tenant, project, id)
	if err != nil {
		return PromotionRecord{}, err
	}
	if len(all) == 0 {
		return PromotionRecord{}, ErrNotFound
	}
	return all[0], nil
}

// Promotions lists the project's promotions, newest first.
func (s *Store) Promotions(ctx context.Context, tenant, project string) ([]PromotionRecord, error) {
	return s.promotions(ctx, `WHERE tenant_id = ? AND project = ?`, tenant, project)
}

func (s *Store) promotions(ctx context.Context, where string, args ...any) ([]PromotionRecord, error) {
	rows, err := s.q(ctx).QueryContext(ctx, `SELECT id, tenant_id, project, from_stage, to_stage, revision, promoter, state, created, message FROM promotions `+where+` ORDER BY created DESC, id`, args...)
	if err != nil {
		return nil, err
	}
	out := []PromotionRecord{}
	for rows.Next() {
		var p PromotionRecord
		var created string
		if err := rows.Scan(&p.ID, &p.Tenant, &p.Project, &p.From, &p.To, &p.Revision, &p.Promoter, &p.State, &created, &p.Message); err != nil {
			rows.Close()
			return nil, err
		}
		p.Created = parseTime(created)
		out = append(out, p)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	for i := range out {
		if out[i].Approvals, err = s.approvals(ctx, out[i].ID); err != nil {
			return nil, err
		}
		if out[i].Targets, err = s.PromotionDeployments(ctx, out[i].ID); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (s *Store) approvals(ctx context.Context, id string) ([]Approval, error) {
	rows, err := s.q(ctx).QueryContext(ctx, `SELECT approver, at FROM promotion_approvals WHERE promotion_id = ? ORDER BY at`, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []Approval{}
	for rows.Next() {
		var a Approval
		var at string
		if err := rows.Scan(&a.Approver, &at); err != nil {
			return nil, err
		}
		a.At = parseTime(at)
		out = append(out, a)
	}
	return out, rows.Err()
}
