package controlplane

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/nexo-io/nexo-edge/contract/protocol"
	"github.com/nexo-io/nexo-edge/contract/signature"
	"github.com/nexo-io/nexo-edge/controlplane/storage"
)

// The Control Plane's signing keys live in its store, sealed with the key-encryption key
// (keyencryption.go): one active key signs new manifests, and previous keys stay trusted
// (advertised to Managers) until an admin retires them, so a rotation has an overlap in which
// manifests signed by either key verify. Server.Key seeds the store on first use; afterwards
// the store is the truth.

// keys lists the store's signing keys, their private keys opened, seeding the store with
// Server.Key when it has none. A key stored in plaintext by an earlier version is sealed on
// first use (KeyEncryption is required: a signing key is never stored in the clear).
func (s *Server) keys(ctx context.Context) ([]storage.StoredKey, error) {
	if s.cfg.KeyEncryption == nil {
		return nil, errors.New("no key-encryption key is configured: the Control Plane stores no signing key in plaintext (controlplane serve --key-encryption-key-file)")
	}
	keys, err := s.cfg.Store.SigningKeys(ctx)
	if err != nil {
		return nil, err
	}
	if len(keys) == 0 {
		if s.cfg.Key == nil {
			return nil, errors.New("no signing key")
		}
		seed := storage.StoredKey{KeyID: signature.KeyID(s.cfg.Key.Public().(ed25519.PublicKey)), PrivatePEM: string(signature.MarshalPrivateKey(s.cfg.Key)), State: storage.KeyActive}
		sealed, err := s.cfg.KeyEncryption.Seal([]byte(seed.PrivatePEM), []byte(seed.KeyID))
		if err != nil {
			return nil, err
		}
		if err := s.cfg.Store.AddActiveKey(ctx, seed.KeyID, sealed); err != nil {
			return nil, err
		}
		return []storage.StoredKey{seed}, nil
	}
	for i, k := range keys {
		if strings.HasPrefix(k.PrivatePEM, "-----BEGIN") { // stored in plaintext by an earlier version
			sealed, err := s.cfg.KeyEncryption.Seal([]byte(k.PrivatePEM), []byte(k.KeyID))
			if err != nil {
				return nil, err
			}
			if err := s.cfg.Store.SealKey(ctx, k.KeyID, sealed); err != nil {
				return nil, err
			}
			continue
		}
		plain, err := s.cfg.KeyEncryption.Open(k.PrivatePEM, []byte(k.KeyID))
		if err != nil {
			return nil, fmt.Errorf("signing key %s: %w", k.KeyID, err)
		}
		keys[i].PrivatePEM = string(plain)
	}
	return keys, nil
}

// activeKey returns the key that signs new manifests.
func (s *Server) activeKey(ctx context.Context) (ed25519.PrivateKey, error) {
	keys, err := s.keys(ctx)
	if err != nil {
		return nil, err
	}
	for _, k := range keys {
		if k.State == storage.KeyActive {
			return signature.ParsePrivateKey([]byte(k.PrivatePEM))
		}
	}
	return nil, errors.New("no active signing key")
}

// advertisedKeys are the public keys Managers must trust: the active and the previous ones.
func (s *Server) advertisedKeys(ctx context.Context) ([]protocol.SigningKey, error) {
	keys, err := s.keys(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]protocol.SigningKey, 0, len(keys))
	for _, k := range keys {
		if k.State == storage.KeyRetired {
			continue
		}
		priv, err := signature.ParsePrivateKey([]byte(k.PrivatePEM))
		if err != nil {
			return nil, err
		}
		out = append(out, protocol.SigningKey{KeyID: k.KeyID, State: k.State,
			PublicKey: string(signature.MarshalPublicKey(priv.Public().(ed25519.PublicKey)))})
	}
	return out, nil
}

// rotateKey makes a new key active; the former one stays trusted until retired.
func (s *Server) rotateKey(w http.ResponseWriter, r *http.Request) error {
	if _, err := s.activeKey(r.Context()); err != nil {
		return err
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return err
	}
	id := signature.KeyID(pub)
	sealed, err := s.cfg.KeyEncryption.Seal(signature.MarshalPrivateKey(priv), []byte(id))
	if err != nil {
		return err
	}
	if err := s.cfg.Store.AddActiveKey(r.Context(), id, sealed); err != nil {
		return err
	}
	auditOf(r).target = id
	s.log().Info("signing key rotated", "active", id)
	writeJSON(w, http.StatusOK, map[string]string{"keyId": id, "publicKey": string(signature.MarshalPublicKey(pub))})
	return nil
}

// retireKey stops advertising a previous key: Managers drop it from the trusted-keys Secret at
// their next heartbeat, and objects signed only by it stop verifying.
func (s *Server) retireKey(w http.ResponseWriter, r *http.Request) error {
	switch err := s.cfg.Store.RetireKey(r.Context(), r.PathValue("key")); {
	case errors.Is(err, storage.ErrNotFound):
		return fail(http.StatusConflict, "no previous signing key %s (the active key cannot be retired: rotate first)", r.PathValue("key"))
	case err != nil:
		return err
	}
	auditOf(r).target = r.PathValue("key")
	s.log().Info("signing key retired", "key", r.PathValue("key"))
	w.WriteHeader(http.StatusNoContent)
	return nil
}
