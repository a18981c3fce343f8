package controlplane

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"net/http"

	"github.com/nexo-io/nexo-edge/contract/protocol"
	"github.com/nexo-io/nexo-edge/contract/signature"
)

// The Control Plane's signing keys live in its store: one active key signs new manifests, and
// previous keys stay trusted (advertised to Managers) until an admin retires them, so a rotation
// has an overlap in which manifests signed by either key verify. Server.Key seeds the store on
// first use; afterwards the store is the truth.

// keys lists the store's signing keys, seeding it with Server.Key when it has none: one read.
func (s *Server) keys(ctx context.Context) ([]StoredKey, error) {
	keys, err := s.Store.SigningKeys(ctx)
	if err != nil || len(keys) > 0 {
		return keys, err
	}
	if s.Key == nil {
		return nil, errors.New("no signing key")
	}
	seed := StoredKey{KeyID: signature.KeyID(s.Key.Public().(ed25519.PublicKey)), PrivatePEM: string(signature.MarshalPrivateKey(s.Key)), State: KeyActive}
	if err := s.Store.AddActiveKey(ctx, seed.KeyID, seed.PrivatePEM); err != nil {
		return nil, err
	}
	return []StoredKey{seed}, nil
}

// activeKey returns the key that signs new manifests.
func (s *Server) activeKey(ctx context.Context) (ed25519.PrivateKey, error) {
	keys, err := s.keys(ctx)
	if err != nil {
		return nil, err
	}
	for _, k := range keys {
		if k.State == KeyActive {
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
		if k.State == KeyRetired {
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
func (s *Server) rotateKey(w http.ResponseWriter, r *http.Request) {
	if _, err := s.activeKey(r.Context()); err != nil {
		writeError(w, http.StatusInternalServerError, "signing keys: %v", err)
		return
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "cannot generate a key")
		return
	}
	id := signature.KeyID(pub)
	if err := s.Store.AddActiveKey(r.Context(), id, string(signature.MarshalPrivateKey(priv))); err != nil {
		writeError(w, http.StatusInternalServerError, "storage error")
		return
	}
	s.log().Info("signing key rotated", "active", id)
	writeJSON(w, http.StatusOK, map[string]string{"keyId": id, "publicKey": string(signature.MarshalPublicKey(pub))})
}

// retireKey stops advertising a previous key: Managers drop it from the trusted-keys Secret at
// their next heartbeat, and objects signed only by it stop verifying.
func (s *Server) retireKey(w http.ResponseWriter, r *http.Request) {
	switch err := s.Store.RetireKey(r.Context(), r.PathValue("key")); {
	case errors.Is(err, ErrNotFound):
		writeError(w, http.StatusConflict, "no previous signing key %s (the active key cannot be retired: rotate first)", r.PathValue("key"))
	case err != nil:
		writeError(w, http.StatusInternalServerError, "storage error")
	default:
		s.log().Info("signing key retired", "key", r.PathValue("key"))
		w.WriteHeader(http.StatusNoContent)
	}
}
