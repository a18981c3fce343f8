package manager

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/nexo-io/nexo-edge/contract/protocol"
	"github.com/nexo-io/nexo-edge/contract/signature"
)

// keyEntryPrefix marks the trusted-keys Secret entries the Manager maintains.
const keyEntryPrefix = "control-plane-"

// syncKeys takes the Control Plane's advertised signing keys (over the authenticated, TLS
// channel to the configured URL) as trusted for deploys, and writes them into the trusted-keys
// Secret so the operator follows (the install created it; the Manager may only get and update
// it): entries control-plane-<key id>.pem are added for new keys and
// removed for keys no longer advertised (retired); other entries, keys an installer added by
// hand, are kept. Nothing is written when the Secret already matches.
func (a *Agent) syncKeys(ctx context.Context, advertised []protocol.SigningKey) error {
	keys := map[string]ed25519.PublicKey{}
	want := map[string][]byte{}
	for _, k := range advertised {
		pub, err := signature.ParsePublicKey([]byte(k.PublicKey))
		if err != nil || signature.KeyID(pub) != k.KeyID {
			return fmt.Errorf("the Control Plane advertised key %q that does not parse or does not match its id", k.KeyID)
		}
		keys[k.KeyID] = pub
		want[keyEntryPrefix+k.KeyID+".pem"] = signature.MarshalPublicKey(pub)
	}
	a.mu.Lock()
	a.advertised = keys
	a.mu.Unlock()
	if a.cfg.TrustedKeysSecret == "" {
		return nil
	}
	secret := &corev1.Secret{}
	key := client.ObjectKey{Namespace: a.cfg.Namespace, Name: a.cfg.TrustedKeysSecret}
	err := a.client.Get(ctx, key, secret)
	if apierrors.IsNotFound(err) {
		// Every install path creates it; the Manager may not create Secrets (it could otherwise
		// make a ServiceAccount-token Secret and read a credential back; docs/rbac.md).
		return fmt.Errorf("the trusted-keys Secret %s does not exist, so the Control Plane's signing keys cannot reach the operator: "+
			"the chart and kustomize create it, nexoctl install does on an OLM install; recreate it with `kubectl -n %s create secret generic %s`", key, key.Namespace, key.Name)
	}
	if err != nil {
		return err
	}
	data := map[string][]byte{}
	for name, v := range secret.Data {
		if !strings.HasPrefix(name, keyEntryPrefix) {
			data[name] = v
		}
	}
	maps.Copy(data, want)
	if maps.EqualFunc(data, secret.Data, func(x, y []byte) bool { return string(x) == string(y) }) {
		return nil
	}
	secret.Data = data
	if err := a.client.Update(ctx, secret); err != nil {
		return err
	}
	a.cfg.Log.Info("trusted-keys Secret updated from the Control Plane", "secret", key.String(), "keys", len(want))
	return nil
}
