// The audit checkpoint (docs/controlplane.md, "Audit"): the hash chain alone cannot show that
// records were cut off its end, so after every transaction that appends records the Control
// Plane writes the head (the last record's seq and hash), signed, to a file outside the
// database. On start and on every verification the database must still hold that record with
// that hash.

package controlplane

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/nexo-io/nexo-edge/controlplane/storage"
)

// Checkpoint is the signed head of the audit history, kept in a file outside the database.
type Checkpoint struct {
	// Path is the file; put it on another volume than the database, or ship it elsewhere.
	Path string
	// Key signs it (the serve --signing-key file's key, which the database does not hold).
	Key ed25519.PrivateKey

	mu   sync.Mutex
	last int64
}

// CheckpointHead is what the checkpoint file holds.
type CheckpointHead struct {
	Seq       int64     `json:"seq"`
	Hash      string    `json:"hash"`
	At        time.Time `json:"at"`
	Signature string    `json:"signature"`
}

func checkpointMessage(seq int64, hash string) []byte {
	return []byte("nexo-audit-checkpoint/v1\n" + strconv.FormatInt(seq, 10) + "\n" + hash)
}

// Save writes r as the head, if it is later than the one saved (atomically: a temporary file
// renamed over the old one).
func (c *Checkpoint) Save(r storage.AuditRecord) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if r.Seq <= c.last {
		return nil
	}
	head := CheckpointHead{Seq: r.Seq, Hash: r.Hash, At: time.Now().UTC(),
		Signature: base64.StdEncoding.EncodeToString(ed25519.Sign(c.Key, checkpointMessage(r.Seq, r.Hash)))}
	raw, _ := json.Marshal(head)
	tmp, err := os.CreateTemp(filepath.Dir(c.Path), ".audit-checkpoint-*")
	if err != nil {
		return err
	}
	if _, err := tmp.Write(append(raw, '\n')); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	if err := os.Rename(tmp.Name(), c.Path); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	c.last = r.Seq
	return nil
}

// Load reads and verifies the checkpoint; ok is false when there is none yet.
func (c *Checkpoint) Load() (CheckpointHead, bool, error) {
	var h CheckpointHead
	raw, err := os.ReadFile(c.Path)
	if errors.Is(err, os.ErrNotExist) {
		return h, false, nil
	}
	if err != nil {
		return h, false, err
	}
	if err := json.Unmarshal(raw, &h); err != nil {
		return h, false, fmt.Errorf("the audit checkpoint %s is not a checkpoint: %w", c.Path, err)
	}
	sig, err := base64.StdEncoding.DecodeString(h.Signature)
	if err != nil || !ed25519.Verify(c.Key.Public().(ed25519.PublicKey), checkpointMessage(h.Seq, h.Hash), sig) {
		return h, false, fmt.Errorf("the audit checkpoint %s is not signed by this Control Plane's key: it was edited", c.Path)
	}
	return h, true, nil
}

// checkAnchor adds the checkpoint to a verification of the chain: the database must hold the
// checkpoint's record with its hash, or records were removed from the end (or the history was
// rewritten). Without a checkpoint configured it changes nothing.
func (s *Server) checkAnchor(ctx context.Context, v *storage.AuditVerification) error {
	if s.cfg.Checkpoint == nil {
		return nil
	}
	head, ok, err := s.cfg.Checkpoint.Load()
	if err != nil {
		v.OK, v.Reason = false, err.Error()
		return nil
	}
	if !ok {
		return nil
	}
	v.Anchor = &storage.Anchor{File: s.cfg.Checkpoint.Path, Seq: head.Seq, Hash: head.Hash}
	if !v.OK {
		return nil
	}
	hash, found, err := s.cfg.Store.AuditHash(ctx, head.Seq)
	switch {
	case err != nil:
		return err
	case !found:
		v.OK, v.BrokenAt, v.Reason = false, head.Seq, fmt.Sprintf("the history ends at record %d, but its checkpoint (%s) names record %d: records were removed from the end", v.Records, s.cfg.Checkpoint.Path, head.Seq)
	case hash != head.Hash:
		v.OK, v.BrokenAt, v.Reason = false, head.Seq, fmt.Sprintf("record %d's hash is not the one its checkpoint (%s) names: the history was rewritten", head.Seq, s.cfg.Checkpoint.Path)
	}
	return nil
}

// init verifies the audit history against its checkpoint, anchors its head and seals the
// signing keys (New).
func (s *Server) init(ctx context.Context) error {
	if _, err := s.keys(ctx); err != nil {
		return err
	}
	if s.cfg.Checkpoint == nil {
		return nil
	}
	v, err := s.cfg.Store.VerifyAudit(ctx)
	if err != nil {
		return err
	}
	if !v.OK {
		// The chain itself is broken inside the database: a new checkpoint would not mend it.
		return fmt.Errorf("the audit history does not verify: %s. The history cannot be repaired in place, and moving the checkpoint (%s) aside does not help: the break is inside the database. "+
			"Restore the database from a backup taken before record %d was written (`controlplane audit verify` against the restored file must pass), then start again",
			v.Reason, s.cfg.Checkpoint.Path, v.BrokenAt)
	}
	if err := s.checkAnchor(ctx, &v); err != nil {
		return err
	}
	if !v.OK {
		// The chain holds but disagrees with its checkpoint (records cut off its end, or the
		// history rewritten after the checkpoint's record).
		return fmt.Errorf("the audit history does not verify: %s. Restore the database from a backup; to start over from this database on purpose, move %s aside (a new checkpoint is written)", v.Reason, s.cfg.Checkpoint.Path)
	}
	if v.Records > 0 {
		if err := s.cfg.Checkpoint.Save(storage.AuditRecord{Seq: v.Records, Hash: v.Head}); err != nil {
			return fmt.Errorf("write the audit checkpoint: %w", err)
		}
	}
	s.cfg.Store.OnAuditCommit(func(r storage.AuditRecord) {
		if err := s.cfg.Checkpoint.Save(r); err != nil {
			s.log().Error("audit checkpoint not written", "seq", r.Seq, "error", err)
		}
	})
	return nil
}
