// Signing keys at rest (docs/controlplane.md, "Signing keys at rest"): the store holds each
// private key sealed with AES-256-GCM under a key-encryption key that lives outside the
// database, in a file (LoadKeyEncryptionKey) or behind a KMS that implements KeyEncrypter.

package controlplane

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"
)

// KeyEncrypter seals and opens the signing keys the store holds. additionalData binds a sealed
// key to its row (its key id), so a sealed key moved to another row does not open.
type KeyEncrypter interface {
	Seal(plaintext, additionalData []byte) (string, error)
	Open(sealed string, additionalData []byte) ([]byte, error)
}

// sealedPrefix marks a key sealed by AESKeyEncrypter.
const sealedPrefix = "aes256gcm:v1:"

// AESKeyEncrypter seals with AES-256-GCM under a 32-byte key.
type AESKeyEncrypter struct{ aead cipher.AEAD }

// NewAESKeyEncrypter returns the encrypter of a 32-byte key.
func NewAESKeyEncrypter(key []byte) (*AESKeyEncrypter, error) {
	if len(key) != 32 {
		return nil, fmt.Errorf("the key-encryption key is %d bytes: it must be 32 (AES-256)", len(key))
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	return &AESKeyEncrypter{aead: aead}, nil
}

// Seal encrypts plaintext with a fresh nonce.
func (e *AESKeyEncrypter) Seal(plaintext, additionalData []byte) (string, error) {
	nonce := make([]byte, e.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	return sealedPrefix + base64.StdEncoding.EncodeToString(e.aead.Seal(nonce, nonce, plaintext, additionalData)), nil
}

// Open decrypts what Seal sealed; another key, or another row's data, fails.
func (e *AESKeyEncrypter) Open(sealed string, additionalData []byte) ([]byte, error) {
	raw, ok := strings.CutPrefix(sealed, sealedPrefix)
	if !ok {
		return nil, errors.New("not sealed by this Control Plane's key encryption")
	}
	b, err := base64.StdEncoding.DecodeString(raw)
	if err != nil || len(b) < e.aead.NonceSize() {
		return nil, errors.New("the sealed key is damaged")
	}
	plain, err := e.aead.Open(nil, b[:e.aead.NonceSize()], b[e.aead.NonceSize():], additionalData)
	if err != nil {
		return nil, errors.New("the sealed key does not open with this key-encryption key (another key file, or the row was altered)")
	}
	return plain, nil
}

// GenerateKeyEncryptionKey returns a new random 32-byte key.
func GenerateKeyEncryptionKey() []byte {
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	return k
}

// LoadKeyEncryptionKey reads the key-encryption key file (32 bytes, base64). When it does not
// exist and create is set, it writes a new one (0600) and reports created.
func LoadKeyEncryptionKey(path string, create bool) (enc *AESKeyEncrypter, created bool, err error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) && create {
		key := GenerateKeyEncryptionKey()
		if err := os.WriteFile(path, []byte(base64.StdEncoding.EncodeToString(key)+"\n"), 0o600); err != nil {
			return nil, false, fmt.Errorf("write the key-encryption key: %w", err)
		}
		enc, err := NewAESKeyEncrypter(key)
		return enc, true, err
	}
	if err != nil {
		return nil, false, fmt.Errorf("read the key-encryption key: %w", err)
	}
	key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(data)))
	if err != nil {
		return nil, false, fmt.Errorf("the key-encryption key file %s is not base64", path)
	}
	enc, err = NewAESKeyEncrypter(key)
	return enc, false, err
}
