package manager

import (
	"context"
	"encoding/json"
	"sort"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nexo-io/nexo-edge/contract/protocol"
	"github.com/nexo-io/nexo-edge/contract/wire"
)

// maxRemembered bounds the applied-command memory; the Control Plane stops redelivering a
// command once it is acknowledged, so only recent ids matter.
const maxRemembered = 500

type appliedEntry struct {
	protocol.Ack
	At time.Time `json:"at"`
}

// recorded returns the outcome of a command id this Manager already applied.
func (a *Agent) recorded(ctx context.Context, id string) (protocol.Ack, bool, error) {
	cm := &corev1.ConfigMap{}
	err := a.client.Get(ctx, client.ObjectKey{Namespace: a.cfg.Namespace, Name: wire.ManagerStateConfigMap}, cm)
	if apierrors.IsNotFound(err) {
		return protocol.Ack{}, false, nil
	}
	if err != nil {
		return protocol.Ack{}, false, err
	}
	raw, ok := cm.Data[id]
	if !ok {
		return protocol.Ack{}, false, nil
	}
	var e appliedEntry
	if err := json.Unmarshal([]byte(raw), &e); err != nil {
		return protocol.Ack{}, false, err
	}
	return e.Ack, true, nil
}

// record stores a command's outcome before it is acknowledged, so a restart never applies it twice.
func (a *Agent) record(ctx context.Context, id string, outcome protocol.Ack) error {
	raw, _ := json.Marshal(appliedEntry{Ack: outcome, At: time.Now().UTC()})
	cm := &corev1.ConfigMap{}
	err := a.client.Get(ctx, client.ObjectKey{Namespace: a.cfg.Namespace, Name: wire.ManagerStateConfigMap}, cm)
	if apierrors.IsNotFound(err) {
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: wire.ManagerStateConfigMap, Namespace: a.cfg.Namespace,
			Labels: map[string]string{wire.PartOfLabel: wire.PartOf}}, Data: map[string]string{id: string(raw)}}
		return a.client.Create(ctx, cm)
	}
	if err != nil {
		return err
	}
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	cm.Data[id] = string(raw)
	trim(cm.Data)
	return a.client.Update(ctx, cm)
}

// trim drops the oldest entries beyond maxRemembered.
func trim(data map[string]string) {
	if len(data) <= maxRemembered {
		return
	}
	type kv struct {
		id string
		at time.Time
	}
	var all []kv
	for id, raw := range data {
		var e appliedEntry
		_ = json.Unmarshal([]byte(raw), &e)
		all = append(all, kv{id, e.At})
	}
	sort.Slice(all, func(i, j int) bool { return all[i].at.Before(all[j].at) })
	for _, e := range all[:len(all)-maxRemembered] {
		delete(data, e.id)
	}
}

// recordHeartbeat updates the status object and the health of the last heartbeat. Messages
// carry errors, which never contain the token.
// interval is the Control Plane's next-heartbeat interval in seconds (0: not answered).
func (a *Agent) recordHeartbeat(ctx context.Context, hbErr error, interval int) {
	a.mu.Lock()
	a.reachable = hbErr == nil
	if hbErr == nil {
		a.lastHeartbeat = time.Now()
		a.metrics.lastHeartbeat.SetToCurrentTime()
	}
	last := a.lastHeartbeat
	a.mu.Unlock()
	result := "ok"
	if hbErr != nil {
		result = hbErr.Error()
	}
	data := map[string]string{wire.StatusLastHeartbeatResult: result, wire.StatusControlPlaneReachable: boolString(hbErr == nil),
		wire.StatusDeployNamespaces: strings.Join(a.cfg.Limits.Namespaces, ","), wire.StatusImageRepositories: strings.Join(a.cfg.Limits.ImageRepositories, ",")}
	if !last.IsZero() {
		data[wire.StatusLastHeartbeatTime] = last.UTC().Format(time.RFC3339)
	}
	if interval > 0 {
		data[wire.StatusHeartbeatInterval] = strconv.Itoa(interval)
	}
	a.updateStatus(ctx, data)
}

func (a *Agent) setLastCommand(ctx context.Context, cmd protocol.Command, outcome protocol.Ack) {
	a.updateStatus(ctx, map[string]string{wire.StatusLastCommand: cmd.ID + " " + cmd.Type + ": " + outcome.Status + ": " + outcome.Message})
}

func (a *Agent) updateStatus(ctx context.Context, data map[string]string) {
	cm := &corev1.ConfigMap{}
	err := a.client.Get(ctx, client.ObjectKey{Namespace: a.cfg.Namespace, Name: wire.ManagerStatusConfigMap}, cm)
	if apierrors.IsNotFound(err) {
		cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: wire.ManagerStatusConfigMap, Namespace: a.cfg.Namespace,
			Labels: map[string]string{wire.PartOfLabel: wire.PartOf}}, Data: data}
		if err := a.client.Create(ctx, cm); err != nil {
			a.cfg.Log.Error(err, "cannot write the status ConfigMap")
		}
		return
	}
	if err != nil {
		a.cfg.Log.Error(err, "cannot read the status ConfigMap")
		return
	}
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	for k, v := range data {
		cm.Data[k] = v
	}
	if err := a.client.Update(ctx, cm); err != nil {
		a.cfg.Log.Error(err, "cannot write the status ConfigMap")
	}
}

func boolString(b bool) string {
	if b {
		return "true"
	}
	return "false"
}
