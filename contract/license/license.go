// Package license issues and verifies Nexo offline licenses.
//
// A license document is one line: "nexo-license-v1.<keyid>.<payload>.<signature>", where
// payload is base64url (no padding) of the JSON claims and signature is base64url of the
// ed25519 signature over the payload bytes. The document lives in a Secret referenced by a
// NexoLicense; only its verified claims are ever shown.
package license

import (
	"crypto/ed25519"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"github.com/nexo-io/nexo-edge/contract/signature"
)

const prefix = "nexo-license-v1"

// Claims are the signed content of a license.
type Claims struct {
	Licensee     string    `json:"licensee"`
	ExpiresAt    time.Time `json:"expiresAt"`
	Entitlements []string  `json:"entitlements"`
	MaxProxies   int32     `json:"maxProxies"`
}

// Errors returned by Parse; messages never contain the document.
var (
	ErrMalformed  = errors.New("license document is malformed")
	ErrUnknownKey = errors.New("license is signed by a key this build does not trust")
	ErrSignature  = errors.New("license signature is invalid")
)

// Issue signs claims into a license document.
func Issue(c Claims, priv ed25519.PrivateKey) (string, error) {
	payload, err := json.Marshal(c)
	if err != nil {
		return "", err
	}
	enc := base64.RawURLEncoding
	keyID := signature.KeyID(priv.Public().(ed25519.PublicKey))
	return strings.Join([]string{prefix, keyID, enc.EncodeToString(payload), enc.EncodeToString(ed25519.Sign(priv, payload))}, "."), nil
}

// Parse verifies a license document against trusted keys (key id → public key) and returns its
// claims. Expiry is not checked here; callers compare ExpiresAt with their clock.
func Parse(doc string, trusted map[string]ed25519.PublicKey) (Claims, error) {
	parts := strings.Split(strings.TrimSpace(doc), ".")
	if len(parts) != 4 || parts[0] != prefix {
		return Claims{}, fmt.Errorf("%w: want %s.<key id>.<payload>.<signature>", ErrMalformed, prefix)
	}
	pub, ok := trusted[parts[1]]
	if !ok {
		return Claims{}, fmt.Errorf("%w (key id %s)", ErrUnknownKey, parts[1])
	}
	enc := base64.RawURLEncoding
	payload, err := enc.DecodeString(parts[2])
	if err != nil {
		return Claims{}, fmt.Errorf("%w: payload is not base64url", ErrMalformed)
	}
	sig, err := enc.DecodeString(parts[3])
	if err != nil || !ed25519.Verify(pub, payload, sig) {
		return Claims{}, ErrSignature
	}
	var c Claims
	if err := json.Unmarshal(payload, &c); err != nil {
		return Claims{}, fmt.Errorf("%w: claims are not JSON", ErrMalformed)
	}
	if c.Licensee == "" || c.ExpiresAt.IsZero() || c.MaxProxies < 1 {
		return Claims{}, fmt.Errorf("%w: licensee, expiresAt and maxProxies >= 1 are required", ErrMalformed)
	}
	return c, nil
}

// DocumentID identifies a license document by its signed claims: the first 16 hex digits of the
// SHA-256 of the payload bytes. Copies of one document in many Secrets, NexoLicenses or
// namespaces share it (so do re-encodings of the same payload), which is what maxProxies counts
// against. It reveals nothing of the document. "" when the document is malformed.
func DocumentID(doc string) string {
	parts := strings.Split(strings.TrimSpace(doc), ".")
	if len(parts) != 4 {
		return ""
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(payload)
	return hex.EncodeToString(sum[:8])
}

//go:embed keys/*.pem
var shipped embed.FS

// ShippedKeys returns the license-signing public keys built into this binary (key id → key).
// The matching private keys are held by Nexo and never enter this repository.
func ShippedKeys() map[string]ed25519.PublicKey {
	out := map[string]ed25519.PublicKey{}
	files, _ := fs.Glob(shipped, "keys/*.pem")
	for _, f := range files {
		data, err := shipped.ReadFile(f)
		if err != nil {
			continue
		}
		if pub, err := signature.ParsePublicKey(data); err == nil {
			out[signature.KeyID(pub)] = pub
		}
	}
	return out
}
