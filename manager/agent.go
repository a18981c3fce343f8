// Package manager is the Nexo Manager: it connects outbound to the Control Plane with the
// environment's connect token, heartbeats the cluster's inventory, applies the commands it gets
// back (at most once per id) and acknowledges them. It never touches an object it does not own.
package manager

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"net/url"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nexo-io/nexo-edge/contract/connecttoken"
	"github.com/nexo-io/nexo-edge/contract/protocol"
)

// Config configures the Manager.
type Config struct {
	TokenFile       string
	ControlPlaneURL string
	// Namespace holds the Manager's state and status ConfigMaps.
	Namespace string
	// OwnerID is the stable value of wire.OwnerLabel on everything the Manager creates. It must be
	// unique per installation; when empty it is "env-<environment id>" from the connect token,
	// so two environments sharing a cluster never touch each other's objects.
	OwnerID string
	// TrustedKeys returns the keys that verify deploy manifests (the Control Plane's signing
	// keys). It is called for every deploy, so a rotated or revoked key takes effect at once.
	TrustedKeys func() (map[string]ed25519.PublicKey, error)
	// ProxyImage is the configured proxy image, reported in heartbeats.
	ProxyImage string
	// TrustedKeysSecret is the Secret (in Namespace) the operator reads trusted signing keys from.
	// The Manager keeps its control-plane-<key id>.pem entries equal to the keys the Control
	// Plane advertises in each heartbeat answer; other entries are left alone. "" disables it.
	TrustedKeysSecret string
	// RESTConfig is how the Manager watches its NexoProxies (a trimmed informer; see
	// proxyInventory): the same identity as the client's.
	RESTConfig *rest.Config
	// WatchNamespaces, when set, are the only namespaces the Manager lists its proxies in and
	// deploys into: the target namespaces of an OLM OperatorGroup (olm.targetNamespaces), where
	// OLM grants it rights. Empty: every namespace (its rights are cluster-wide).
	WatchNamespaces []string
	// Limits are the cluster's own limits (docs/security.md, "The cluster's own limit"), set by
	// the cluster admin: the only namespaces the Manager deploys into, rolls out in or deletes
	// from, and the only image repositories a rollout or a deployed NexoProxy's proxyImage may
	// name ("*" allows all). Empty allows nothing. Reported in every heartbeat; no command from
	// the Control Plane can widen them.
	Limits protocol.Limits
	// AllowAdoption is the migration gate: with it, a deploy may take over an existing object
	// that carries wire.AdoptAnnotation="true"; without it, any object without the owner label is refused.
	AllowAdoption bool
	Version       string
	HTTPClient    *http.Client
	// AckAttempts bounds acknowledgement retries per heartbeat round (default 5).
	AckAttempts int
	Log         logr.Logger
}

// Agent is a running Manager.
type Agent struct {
	cfg       Config
	client    client.Client
	discovery discovery.DiscoveryInterface
	metrics   *metrics

	mu  sync.Mutex
	url string // the Control Plane URL: configured, or read by WaitForConfiguration
	// notConfigured says what the Manager still needs before it can connect (nil once configured).
	notConfigured error
	lastHeartbeat time.Time
	reachable     bool
	// advertised are the signing keys of the last heartbeat answer (trusted for deploys too).
	advertised map[string]ed25519.PublicKey

	invMu sync.Mutex // guards inv's creation
	inv   *proxyInventory
	// kindSupport: the Control Plane announced CapKindSupport, so heartbeats carry
	// SchemaOnlyKinds (an older Control Plane would refuse the field).
	kindSupport atomic.Bool
}

// Validate reports a configuration the Manager cannot run with, saying what to set. An empty
// Control Plane URL is valid: the Manager then waits for one in the installation ConfigMap
// (WaitForControlPlaneURL).
func (c Config) Validate() error {
	if c.ControlPlaneURL != "" {
		if err := validURL(c.ControlPlaneURL); err != nil {
			return err
		}
	}
	if c.TokenFile == "" {
		return errors.New("no connect token file: set --token-file")
	}
	return nil
}

func validURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("control plane URL %q is not an http(s) URL with a host, such as https://cp.example.com", raw)
	}
	return nil
}

// controlPlaneURL is the configured URL, or the one read from the installation ConfigMap.
func (a *Agent) controlPlaneURL() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.url
}

// NewAgent builds an Agent over a client and a discovery client (New builds them for a process).
func NewAgent(cfg Config, c client.Client, d discovery.DiscoveryInterface) *Agent {
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 15 * time.Second}
	}
	if cfg.AckAttempts <= 0 {
		cfg.AckAttempts = 5
	}
	return &Agent{cfg: cfg, client: c, discovery: d, metrics: newMetrics(), url: cfg.ControlPlaneURL, notConfigured: errNotChecked}
}

// OwnerID is the value of the owner label on everything this Manager creates: the configured
// one, else env-<environment id> of the connect token, read when needed (the token Secret may
// appear after the Manager starts).
func (a *Agent) OwnerID() string {
	if a.cfg.OwnerID != "" {
		return a.cfg.OwnerID
	}
	return "env-" + a.environment()
}

// maxResponseBytes bounds every body the Manager reads from the Control Plane. The Control
// Plane delivers at most 4 MiB of commands per heartbeat (plus the first command whatever its
// size, itself bounded at 8 MiB when queued).
const maxResponseBytes = 12 << 20

// environment is the environment id embedded in the connect token ("" when it cannot be read):
// the audience deploy signatures must name.
func (a *Agent) environment() string {
	tok, err := a.token()
	if err != nil {
		return ""
	}
	env, _ := connecttoken.Parse(tok)
	return env
}

// trustedKeys are the configured keys (the mounted Secret) and the ones the Control Plane
// advertised in its last answer.
func (a *Agent) trustedKeys() (map[string]ed25519.PublicKey, error) {
	out := map[string]ed25519.PublicKey{}
	if a.cfg.TrustedKeys != nil {
		keys, err := a.cfg.TrustedKeys()
		if err != nil {
			return nil, err
		}
		maps.Copy(out, keys)
	}
	a.mu.Lock()
	maps.Copy(out, a.advertised)
	a.mu.Unlock()
	return out, nil
}

// token re-reads the token file on every call, so a rotated Secret is picked up.
func (a *Agent) token() (string, error) {
	raw, err := os.ReadFile(a.cfg.TokenFile)
	if err != nil {
		return "", fmt.Errorf("read the connect token file: %w", err)
	}
	tok := strings.TrimSpace(string(raw))
	if _, err := connecttoken.Parse(tok); err != nil {
		return "", err
	}
	return tok, nil
}

// Run heartbeats until ctx ends. Failures back off exponentially with jitter; the Control Plane
// steers the normal interval. Losing the Control Plane stops new commands only.
func (a *Agent) Run(ctx context.Context) error {
	if !a.WaitForConfiguration(ctx) {
		return nil
	}
	backoff := heartbeatBackoff()
	for {
		next, err := a.Round(ctx)
		pause := wait.Jitter(next, 0.2)
		if err != nil {
			pause = backoff.Step()
			a.cfg.Log.Error(err, "heartbeat failed; retrying", "in", pause.Round(time.Millisecond).String())
		} else {
			backoff = heartbeatBackoff()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(pause):
		}
	}
}

// heartbeatBackoff is the pause after each failed heartbeat in a row: 1 s, doubling up to a
// minute, each with up to 20% jitter so Managers cut off together do not return together.
func heartbeatBackoff() wait.Backoff {
	return wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.2, Steps: math.MaxInt32, Cap: time.Minute}
}

// inventoryCatchUp is the pause between heartbeats while inventory changes wait to be sent.
const inventoryCatchUp = time.Second

// Round is one heartbeat and the commands it returned. It returns the next interval.
func (a *Agent) Round(ctx context.Context) (time.Duration, error) {
	resp, err := a.Heartbeat(ctx)
	interval := 0
	if err == nil {
		interval = resp.NextHeartbeatSeconds
	}
	a.recordHeartbeat(ctx, err, interval)
	if err != nil {
		return 0, err
	}
	if len(resp.SigningKeys) > 0 {
		if err := a.syncKeys(ctx, resp.SigningKeys); err != nil {
			a.cfg.Log.Error(err, "cannot update the trusted-keys Secret; deploys still use the advertised keys")
		}
	}
	for _, cmd := range resp.Commands {
		a.handle(ctx, cmd)
	}
	next := time.Duration(resp.NextHeartbeatSeconds) * time.Second
	if next <= 0 {
		next = 30 * time.Second
	}
	if a.inv.pending() {
		// More changes than one heartbeat carries (a first report, a resync): send the rest now.
		next = inventoryCatchUp
	}
	return next, nil
}

// Heartbeat sends the inventory and returns the Control Plane's answer.
func (a *Agent) Heartbeat(ctx context.Context) (*protocol.HeartbeatResponse, error) {
	hb, err := a.Inventory(ctx)
	if err != nil {
		return nil, fmt.Errorf("collect inventory: %w", err)
	}
	var resp protocol.HeartbeatResponse
	if err := a.post(ctx, "/v1/heartbeat", hb, &resp); err != nil {
		return nil, err
	}
	a.inv.confirm(hb, &resp)
	a.inv.useStatus(&resp)
	if slices.Contains(resp.Capabilities, protocol.CapKindSupport) {
		a.kindSupport.Store(true)
	}
	return &resp, nil
}

// post sends one request. Errors never include the token.
func (a *Agent) post(ctx context.Context, path string, body, out any) error {
	tok, err := a.token()
	if err != nil {
		return err
	}
	raw, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(a.controlPlaneURL(), "/")+path, bytes.NewReader(raw))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	resp, err := a.cfg.HTTPClient.Do(req)
	if err != nil {
		return fmt.Errorf("control plane unreachable: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		var e protocol.Error
		_ = json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&e)
		return fmt.Errorf("control plane answered %s: %s", resp.Status, e.Error)
	}
	if out == nil {
		return nil
	}
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		return fmt.Errorf("read the control plane's answer: %w", err)
	}
	if len(answer) > maxResponseBytes {
		return fmt.Errorf("the control plane's answer to %s exceeds %d MiB; refused", path, maxResponseBytes>>20)
	}
	return json.Unmarshal(answer, out)
}

// handle applies a command once and acknowledges it; a command id already applied is only
// acknowledged again with its recorded outcome.
func (a *Agent) handle(ctx context.Context, cmd protocol.Command) {
	log := a.cfg.Log.WithValues("command", cmd.ID, "type", cmd.Type)
	row, _ := protocol.CommandTypeOf(cmd.Type)
	outcome, seen, err := a.recorded(ctx, cmd.ID)
	if err != nil {
		log.Error(err, "cannot read applied command ids; not applying")
		return
	}
	if !seen {
		outcome = a.applySafely(ctx, cmd)
		// A command that changes nothing runs again if delivered again; the outcome of one that
		// changes the cluster is recorded first, without its prediction (bounded by
		// protocol.MaxPreviewBytes, too large for the state ConfigMap's 500 entries), so a
		// restart never applies it twice.
		kept := outcome
		kept.Preview = nil
		if !row.ChangesNothing {
			if err := a.record(ctx, cmd.ID, kept); err != nil {
				log.Error(err, "cannot record the command outcome; it will be acknowledged later")
			}
		}
		a.metrics.commands.WithLabelValues(cmd.Type, outcome.Status).Inc()
		log.Info("command done", "status", outcome.Status, "message", outcome.Message)
	}
	a.setLastCommand(ctx, cmd, outcome)
	if err := a.ack(ctx, cmd.ID, outcome); err != nil {
		log.Error(err, "acknowledgement failed; the command stays recorded and is acknowledged when it is delivered again")
	}
}

// applySafely applies a command; a panic while applying it becomes a failed outcome, so one bad
// command is acknowledged instead of crash-looping the Manager on every redelivery.
func (a *Agent) applySafely(ctx context.Context, cmd protocol.Command) (outcome protocol.Ack) {
	defer func() {
		if r := recover(); r != nil {
			a.cfg.Log.Error(fmt.Errorf("%v", r), "command panicked; acknowledged as failed", "command", cmd.ID, "stack", string(debug.Stack()))
			outcome = failed("the Manager failed internally while applying this command (%v); nothing more is attempted for it; report it with the Manager's logs", r)
		}
	}()
	return a.apply(ctx, cmd)
}

// ack sends a command's outcome, with up to AckAttempts attempts: 200 ms apart, doubling up to
// 10 s, with jitter. It returns the last attempt's error.
func (a *Agent) ack(ctx context.Context, id string, outcome protocol.Ack) error {
	var last error
	attempt := 0
	err := wait.ExponentialBackoffWithContext(ctx, wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Jitter: 1, Steps: a.cfg.AckAttempts, Cap: 10 * time.Second},
		func(ctx context.Context) (bool, error) {
			if attempt++; attempt > 1 {
				a.metrics.ackRetries.Inc()
			}
			last = a.post(ctx, "/v1/commands/"+id+"/ack", outcome, nil)
			return last == nil, nil
		})
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case last != nil:
		return last
	}
	return err
}

// Ready reports readiness: the Manager is Ready as a process. Whether it is configured and
// whether it reaches the Control Plane are its status (the status ConfigMap, the
// nexo_manager_condition metric, the Event on its Deployment, nexoctl preflight), not its
// readiness: a console install (OLM) must reach Succeeded before anything is configured, and a
// Control Plane outage must not mark the operator failed (docs/protocol.md, "Configuration").
func (a *Agent) Ready() error { return nil }

// Configured says what the Manager still needs before it can connect, or nil.
func (a *Agent) Configured() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.notConfigured
}
