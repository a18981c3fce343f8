package controllers

import (
	"context"
	"crypto/ed25519"
	"maps"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/nexo-io/nexo-edge/contract/signature"
	"github.com/nexo-io/nexo-edge/contract/wire"
)

// TrustedKeys holds the public keys managed-resource signatures are checked against. They are
// read from a Secret in the operator namespace (one PEM or base64 ed25519 public key per data
// entry) and re-read when that Secret changes.
type TrustedKeys struct {
	Secret types.NamespacedName
	// Audience is this installation's environment id (--environment-id): a signature made for
	// another environment is refused, and with no audience every signature is
	// (signature.Verify).
	Audience string
	// AudienceFrom, when Audience is empty, is the ConfigMap whose environmentID entry names the
	// environment (wire.InstallConfigMap): re-read until it appears and whenever it changes.
	AudienceFrom types.NamespacedName

	mu         sync.RWMutex
	keys       map[string]ed25519.PublicKey
	configured string // the environment id AudienceFrom named at the last LoadAudience
}

// EnvironmentID is the audience signatures must name: --environment-id, else the one the
// installation's ConfigMap names ("" when neither does).
func (t *TrustedKeys) EnvironmentID() string {
	if t.Audience != "" {
		return t.Audience
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.configured
}

// followsConfigMap reports whether the environment id comes from AudienceFrom.
func (t *TrustedKeys) followsConfigMap() bool { return t.Audience == "" && t.AudienceFrom.Name != "" }

// LoadAudience re-reads AudienceFrom's environmentID and reports whether it changed. A missing
// ConfigMap or entry means no environment yet.
func (t *TrustedKeys) LoadAudience(ctx context.Context, r client.Reader) (bool, error) {
	if !t.followsConfigMap() {
		return false, nil
	}
	cm := &corev1.ConfigMap{}
	if err := r.Get(ctx, t.AudienceFrom, cm); err != nil && !apierrors.IsNotFound(err) {
		return false, err
	}
	id := strings.TrimSpace(cm.Data[wire.ConfigEnvironmentID])
	t.mu.Lock()
	defer t.mu.Unlock()
	if id == t.configured {
		return false, nil
	}
	t.configured = id
	logf.FromContext(ctx).Info("environment id read from the installation ConfigMap", "configMap", t.AudienceFrom.String(), "environmentID", id)
	return true, nil
}

// Get returns the current keys (key id → key). Callers must not modify the map.
func (t *TrustedKeys) Get() map[string]ed25519.PublicKey {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.keys
}

// Load reads the Secret and reports whether the key set changed. A missing Secret means no
// trusted keys: every managed resource then fails verification with ErrUnknownKey.
func (t *TrustedKeys) Load(ctx context.Context, r client.Reader) (bool, error) {
	log := logf.FromContext(ctx)
	keys := map[string]ed25519.PublicKey{}
	secret := &corev1.Secret{}
	if err := r.Get(ctx, t.Secret, secret); err != nil && !apierrors.IsNotFound(err) {
		return false, err
	}
	for name, data := range secret.Data {
		pub, err := signature.ParsePublicKey(data)
		if err != nil {
			log.Info("ignoring trusted-keys entry that is not an ed25519 public key", "secret", t.Secret.String(), "entry", name, "error", err.Error())
			continue
		}
		keys[signature.KeyID(pub)] = pub
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	changed := !maps.EqualFunc(t.keys, keys, func(a, b ed25519.PublicKey) bool { return a.Equal(b) })
	t.keys = keys
	if changed {
		log.Info("trusted signing keys loaded", "secret", t.Secret.String(), "keys", len(keys))
	}
	return changed, nil
}
