package controlplane

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/nexo-io/nexo-edge/contract/protocol"
)

// Target states of a command, per proxy it carries (docs/controlplane.md, "Runtime truth"): what
// the cluster reports now, through the Manager's heartbeats, of each NexoProxy a deploy or
// rollout carries or an uninstall removes.
const (
	// TargetSynced: the command is applied and the proxy runs it (Ready, its available revision
	// the desired one), or, for an uninstall, the proxy is gone.
	TargetSynced = "Synced"
	// TargetProgressing: the command waits for delivery or acknowledgement, or the proxy is
	// rolling out, not reported yet, or not Ready for a reason that is not a failure.
	TargetProgressing = "Progressing"
	// TargetDegraded: the command failed, or the proxy is Degraded or Failed; Reason is the
	// proxy's Ready reason (UnsupportedReference, SignatureMismatch…) or CommandFailed.
	TargetDegraded = "Degraded"
)

// TargetStatus is one proxy of a command and what the cluster last reported of it.
type TargetStatus struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	State     string `json:"state"`
	Reason    string `json:"reason"`
	// Phase, GraphRevision and AvailableRevision are the proxy's, as last reported.
	Phase             string `json:"phase,omitempty"`
	GraphRevision     string `json:"graphRevision,omitempty"`
	AvailableRevision string `json:"availableRevision,omitempty"`
}

// targetStatus judges one target of c against the inventory (inv: reported proxies by key).
func targetStatus(c CommandRecord, ref protocol.ObjectRef, inv map[protocol.ObjectRef]protocol.Deployment) TargetStatus {
	t := TargetStatus{Namespace: ref.Namespace, Name: ref.Name}
	d, reported := inv[ref]
	if reported {
		t.Phase, t.GraphRevision, t.AvailableRevision = d.Phase, d.GraphRevision, d.AvailableRevision
	}
	switch {
	case c.Status == string(protocol.Failed) || c.Status == "dead":
		t.State, t.Reason = TargetDegraded, "CommandFailed"
	case c.Status == "pending":
		t.State, t.Reason = TargetProgressing, "CommandPending"
	case c.Status != string(protocol.Applied):
		t.State, t.Reason = TargetProgressing, "CommandDelivered"
	case c.Type == protocol.Uninstall && reported:
		t.State, t.Reason = TargetProgressing, "Removing"
	case c.Type == protocol.Uninstall:
		t.State, t.Reason = TargetSynced, "Removed"
	case !reported:
		t.State, t.Reason = TargetProgressing, "NotReported"
	case d.Phase == "":
		// A Manager without proxy.status reports replicas only.
		t.State, t.Reason = TargetProgressing, "StatusNotReported"
		if d.Replicas > 0 && d.ReadyReplicas >= d.Replicas {
			t.State, t.Reason = TargetSynced, "ReplicasReady"
		}
	case d.Phase == "Degraded" || d.Phase == "Failed":
		t.State, t.Reason = TargetDegraded, orElse(d.ReadyReason, d.Phase)
	case d.Phase == "Ready" && d.AvailableRevision == d.GraphRevision:
		t.State, t.Reason = TargetSynced, orElse(d.ReadyReason, "Ready")
	default:
		t.State, t.Reason = TargetProgressing, orElse(d.ReadyReason, d.Phase)
	}
	return t
}

func orElse(s, def string) string {
	if s != "" {
		return s
	}
	return def
}

// withTargets fills each command's Targets from its stored proxies and the inventory.
func (s *Server) withTargets(ctx context.Context, envID string, cmds []CommandRecord, deployed []protocol.Deployment) error {
	refs, err := s.Store.CommandTargets(ctx, envID)
	if err != nil {
		return err
	}
	inv := make(map[protocol.ObjectRef]protocol.Deployment, len(deployed))
	for _, d := range deployed {
		inv[d.Key()] = d
	}
	for i := range cmds {
		for _, ref := range refs[cmds[i].ID] {
			cmds[i].Targets = append(cmds[i].Targets, targetStatus(cmds[i], ref, inv))
		}
	}
	return nil
}

// CommandTargets returns the proxies of each command of envID: a deploy's and a rollout's from
// command_proxies, an uninstall's from its body.
func (s *Store) CommandTargets(ctx context.Context, envID string) (map[string][]protocol.ObjectRef, error) {
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

// lostFloor is the least heartbeat age that refuses commands: with a short heartbeat interval,
// 10 intervals pass while a Manager pod is merely rescheduled.
const lostFloor = 5 * time.Minute

// refuseLost refuses a command to an environment whose Manager is lost (and for at least
// lostFloor): it would wait undelivered, and what it carries would be decided on a cluster
// nobody has heard from.
func (s *Server) refuseLost(ctx context.Context, env Environment) error {
	h, _, err := s.health(ctx, env.ID, s.now())
	if err != nil {
		return err
	}
	if h.State != StateLost || time.Duration(*h.AgeSeconds)*time.Second < lostFloor {
		return nil
	}
	return fail(http.StatusConflict, "environment %s is lost: its Manager's last heartbeat was %s ago, more than 10 heartbeat intervals (%s), so the command would not be delivered; nothing was queued. "+
		"Check its Manager (nexoctl status in the cluster, the Manager's readiness and log) and its network to the Control Plane, then send the command again",
		env.ID, time.Duration(*h.AgeSeconds)*time.Second, s.nextHeartbeat())
}
