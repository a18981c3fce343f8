package controlplane

import (
	"context"
	"net/http"
	"time"

	"github.com/nexo-io/nexo-edge/contract/protocol"
	"github.com/nexo-io/nexo-edge/controlplane/storage"
)

// States of a command's proxies (docs/controlplane.md, "Runtime truth"): what the cluster
// reports now, through the Manager's heartbeats, of each NexoProxy a deploy or rollout carries
// or an uninstall removes. (A stage's targets, environment × namespace, are targeting.Target.)
const (
	// ProxySynced: the command is applied and the proxy runs it (Ready, its available revision
	// the desired one), or, for an uninstall, the proxy is gone.
	ProxySynced = "Synced"
	// ProxyProgressing: the command waits for delivery or acknowledgement, or the proxy is
	// rolling out, not reported yet, or not Ready for a reason that is not a failure.
	ProxyProgressing = "Progressing"
	// ProxyDegraded: the command failed, or the proxy is Degraded or Failed; Reason is the
	// proxy's Ready reason (UnsupportedReference, SignatureMismatch…) or CommandFailed.
	ProxyDegraded = "Degraded"
)

// CommandView is a command as the environment view shows it: the stored record and the proxies
// it carries, each with what the cluster last reported of it.
type CommandView struct {
	storage.CommandRecord
	Proxies []CommandProxy `json:"proxies,omitempty"`
	// Result is what the acknowledgement brought back: a preview's answer, or the proxies a
	// deploy was predicted to move (protocol.Ack.Preview).
	Result *protocol.PreviewResult `json:"result,omitempty"`
}

// CommandProxy is one proxy of a command and what the cluster last reported of it.
type CommandProxy struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	State     string `json:"state"`
	Reason    string `json:"reason"`
	// Phase, GraphRevision and AvailableRevision are the proxy's, as last reported.
	Phase             string `json:"phase,omitempty"`
	GraphRevision     string `json:"graphRevision,omitempty"`
	AvailableRevision string `json:"availableRevision,omitempty"`
}

// commandProxy judges one proxy of c against the inventory (inv: reported proxies by key).
func commandProxy(c storage.CommandRecord, ref protocol.ObjectRef, inv map[protocol.ObjectRef]protocol.Deployment) CommandProxy {
	row, _ := protocol.CommandTypeOf(c.Type)
	removes := row.LeavesDeployedSet // the command removes its proxy: done when it is gone
	t := CommandProxy{Namespace: ref.Namespace, Name: ref.Name}
	d, reported := inv[ref]
	if reported {
		t.Phase, t.GraphRevision, t.AvailableRevision = d.Phase, d.GraphRevision, d.AvailableRevision
	}
	switch {
	case c.Status == storage.CommandFailed || c.Status == storage.CommandDead:
		t.State, t.Reason = ProxyDegraded, "CommandFailed"
	case c.Status == storage.CommandPending:
		t.State, t.Reason = ProxyProgressing, "CommandPending"
	case c.Status != storage.CommandApplied:
		t.State, t.Reason = ProxyProgressing, "CommandDelivered"
	case removes && reported:
		t.State, t.Reason = ProxyProgressing, "Removing"
	case removes:
		t.State, t.Reason = ProxySynced, "Removed"
	case !reported:
		t.State, t.Reason = ProxyProgressing, "NotReported"
	case d.Phase == "":
		// A Manager without proxy.status reports replicas only.
		t.State, t.Reason = ProxyProgressing, "StatusNotReported"
		if d.Replicas > 0 && d.ReadyReplicas >= d.Replicas {
			t.State, t.Reason = ProxySynced, "ReplicasReady"
		}
	case d.Phase == "Degraded" || d.Phase == "Failed":
		t.State, t.Reason = ProxyDegraded, orElse(d.ReadyReason, d.Phase)
	case d.Phase == "Ready" && d.AvailableRevision == d.GraphRevision:
		t.State, t.Reason = ProxySynced, orElse(d.ReadyReason, "Ready")
	default:
		t.State, t.Reason = ProxyProgressing, orElse(d.ReadyReason, d.Phase)
	}
	return t
}

func orElse(s, def string) string {
	if s != "" {
		return s
	}
	return def
}

// commandViews are cmds with their proxies, from the stored proxies of each and the inventory.
func (s *Server) commandViews(ctx context.Context, envID string, cmds []storage.CommandRecord, deployed []protocol.Deployment) ([]CommandView, error) {
	refs, err := s.cfg.Store.CommandProxies(ctx, envID)
	if err != nil {
		return nil, err
	}
	inv := make(map[protocol.ObjectRef]protocol.Deployment, len(deployed))
	for _, d := range deployed {
		inv[d.Key()] = d
	}
	out := make([]CommandView, len(cmds))
	for i, c := range cmds {
		out[i].CommandRecord = c
		for _, ref := range refs[c.ID] {
			out[i].Proxies = append(out[i].Proxies, commandProxy(c, ref, inv))
		}
		if c.Status == storage.CommandApplied && (c.Type == protocol.Preview || c.Type == protocol.Deploy) {
			if out[i].Result, err = s.commandResult(ctx, c.ID); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// lostFloor is the least heartbeat age that refuses commands: with a short heartbeat interval,
// 10 intervals pass while a Manager pod is merely rescheduled.
const lostFloor = 5 * time.Minute

// refuseLost refuses a command to an environment whose Manager is lost (and for at least
// lostFloor): it would wait undelivered, and what it carries would be decided on a cluster
// nobody has heard from.
func (s *Server) refuseLost(ctx context.Context, env storage.Environment) error {
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
