package manager

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nexo-io/nexo-edge/contract/wire"
)

// errNotChecked is the Manager's configuration state before its first look.
var errNotChecked = errors.New("the Manager has not checked its configuration yet")

// configPoll is how often the Manager looks again while it is not configured.
var configPoll = 5 * time.Second

// WaitForConfiguration returns once the Manager is configured, or false when ctx ends first.
// Configured means: a Control Plane URL (the configured one, else the installation ConfigMap's
// controlPlaneURL: a console install creates it after the pod starts), a connect token that
// parses, and the trusted-keys Secret (the Manager may not create Secrets). Until then it looks
// again every configPoll and says what is missing and where to create it: in its status
// ConfigMap (configured, notConfigured), its log and the nexo_manager_condition metric. It stays
// Ready throughout (Ready).
func (a *Agent) WaitForConfiguration(ctx context.Context) bool {
	var last string
	err := wait.PollUntilContextCancel(ctx, configPoll, true, func(ctx context.Context) (bool, error) {
		missing := a.checkConfiguration(ctx)
		a.mu.Lock()
		a.notConfigured = missing
		a.mu.Unlock()
		a.metrics.setCondition("Configured", missing == nil)
		if missing == nil {
			a.updateStatus(ctx, map[string]string{wire.StatusConfigured: "true", wire.StatusNotConfigured: ""})
			a.cfg.Log.Info("configured", "controlPlane", a.controlPlaneURL())
			if last != "" {
				a.postEvent(ctx, corev1.EventTypeNormal, "Configured", "the Manager has its Control Plane URL, connect token and trusted-keys Secret, and connects to "+a.controlPlaneURL())
			}
			return true, nil
		}
		if msg := missing.Error(); msg != last {
			last = msg
			a.cfg.Log.Info("not configured: " + msg)
			a.updateStatus(ctx, map[string]string{wire.StatusConfigured: "false", wire.StatusNotConfigured: msg,
				wire.StatusLastHeartbeatResult: "not configured: " + msg, wire.StatusControlPlaneReachable: "false"})
			a.postEvent(ctx, corev1.EventTypeWarning, "NotConfigured", "not configured: "+msg)
		}
		return false, nil
	})
	return err == nil
}

// checkConfiguration says what is missing, each with where to create it (nil: nothing). A URL
// read from the installation ConfigMap is kept.
func (a *Agent) checkConfiguration(ctx context.Context) error {
	ns := a.cfg.Namespace
	var missing []string
	if a.controlPlaneURL() == "" {
		key := client.ObjectKey{Namespace: ns, Name: wire.InstallConfigMap}
		cm := &corev1.ConfigMap{}
		err := a.client.Get(ctx, key, cm)
		raw := strings.TrimSpace(cm.Data[wire.ConfigControlPlane])
		switch {
		case err != nil && !apierrors.IsNotFound(err):
			missing = append(missing, fmt.Sprintf("the Control Plane URL: cannot read the ConfigMap %s: %v", key, err))
		case raw == "":
			missing = append(missing, fmt.Sprintf("the Control Plane URL: create the ConfigMap %s in namespace %s with the key %s (the URL in the Control Plane's install command; "+
				"nexoctl install --control-plane-url URL writes it), or set --control-plane-url or NEXO_CONTROL_PLANE_URL (OLM: the Subscription's config.env); there is no default",
				wire.InstallConfigMap, ns, wire.ConfigControlPlane))
		default:
			if err := validURL(raw); err != nil {
				missing = append(missing, fmt.Sprintf("a valid Control Plane URL in the ConfigMap %s: %v", key, err))
				break
			}
			a.mu.Lock()
			a.url = raw
			a.mu.Unlock()
			a.cfg.Log.Info("Control Plane URL read from the installation ConfigMap", "configMap", key.String(), "controlPlane", raw)
		}
	}
	if _, err := a.token(); err != nil {
		missing = append(missing, fmt.Sprintf("the connect token: create the Secret %s in namespace %s with the key %s (nexoctl install --token-file FILE does; %v)",
			wire.ConnectTokenSecret, ns, wire.ConnectTokenKey, err))
	}
	if name := a.cfg.TrustedKeysSecret; name != "" {
		err := a.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.Secret{})
		switch {
		case apierrors.IsNotFound(err):
			missing = append(missing, fmt.Sprintf("the trusted-keys Secret: create the Secret %s in namespace %s, empty (the Manager fills it with the Control Plane's signing keys; "+
				"nexoctl install does, or kubectl -n %s create secret generic %s)", name, ns, ns, name))
		case err != nil:
			missing = append(missing, fmt.Sprintf("the trusted-keys Secret: cannot read %s/%s: %v", ns, name, err))
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return errors.New("missing " + strings.Join(missing, "; and "))
}

// noteLimit is the longest Event note the API server accepts (1 kB).
const noteLimit = 1024

// postEvent records one Event (core v1, as controllers/eventpost posts them) on the Manager's own Deployment, where
// kubectl describe and the console show it. The Manager posts one per change of its
// configuration state, so it keeps no series. Without its Deployment (a Manager run outside
// one) there is nothing to attach it to, and a failure is only logged.
func (a *Agent) postEvent(ctx context.Context, eventtype, reason, note string) {
	dep := &appsv1.Deployment{}
	if err := a.client.Get(ctx, client.ObjectKey{Namespace: a.cfg.Namespace, Name: wire.ManagerName}, dep); err != nil {
		a.cfg.Log.V(1).Info("no Event: cannot read the Manager's Deployment", "error", err.Error())
		return
	}
	if len(note) > noteLimit {
		note = strings.ToValidUTF8(note[:noteLimit-len("…")], "") + "…"
	}
	host, _ := os.Hostname()
	now := time.Now()
	ev := &corev1.Event{
		ObjectMeta:          metav1.ObjectMeta{GenerateName: wire.ManagerName + "-", Namespace: a.cfg.Namespace},
		InvolvedObject:      corev1.ObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Namespace: dep.Namespace, Name: dep.Name, UID: dep.UID},
		Reason:              reason,
		Message:             note,
		Type:                eventtype,
		Source:              corev1.EventSource{Component: wire.ManagerName},
		FirstTimestamp:      metav1.NewTime(now),
		LastTimestamp:       metav1.NewTime(now),
		Count:               1,
		EventTime:           metav1.NewMicroTime(now),
		Action:              "Configure",
		ReportingController: wire.ManagerName,
		ReportingInstance:   truncate(wire.ManagerName+"-"+host, 128),
	}
	if err := a.client.Create(ctx, ev); err != nil {
		a.cfg.Log.Error(err, "cannot record an Event", "reason", reason)
	}
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}
