// Package connecttoken defines the connect-token format shared by the Control Plane (which
// issues tokens), nexoctl (which validates the file before installing it) and the Manager.
//
// A token is "nxct_<environment id>_<secret>": the environment id is 8–32 lowercase letters or
// digits, the secret 43 base64url characters (32 random bytes). Only the token's hash is stored
// by the Control Plane. Errors never contain the token.
package connecttoken

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode"
)

const prefix = "nxct_"

var (
	envIDPattern = regexp.MustCompile(`^[a-z0-9]{8,32}$`)
	secretLen    = base64.RawURLEncoding.EncodedLen(32)

	// ErrEmpty means the token is empty.
	ErrEmpty = errors.New("the connect token is empty")
	// ErrWhitespace means the token has leading or trailing whitespace, usually the newline an
	// editor or `echo` adds.
	ErrWhitespace = errors.New("the connect token has leading or trailing whitespace (often a trailing newline); write it without one, e.g. `printf '%s' \"$TOKEN\" > token`")
	// ErrFormat means the token does not have the nxct_<environment id>_<secret> shape.
	ErrFormat = errors.New("the connect token is not in the nxct_<environment id>_<secret> format; copy it again from the Control Plane")
)

// Parse validates a token and returns its environment id.
func Parse(token string) (string, error) {
	if token == "" {
		return "", ErrEmpty
	}
	if strings.TrimSpace(token) != token {
		return "", ErrWhitespace
	}
	if strings.IndexFunc(token, unicode.IsSpace) >= 0 || !strings.HasPrefix(token, prefix) {
		return "", ErrFormat
	}
	env, secret, ok := strings.Cut(strings.TrimPrefix(token, prefix), "_")
	if !ok || !envIDPattern.MatchString(env) || len(secret) != secretLen {
		return "", ErrFormat
	}
	if _, err := base64.RawURLEncoding.DecodeString(secret); err != nil {
		return "", ErrFormat
	}
	return env, nil
}

// New issues a token for an environment.
func New(envID string) (string, error) {
	if !envIDPattern.MatchString(envID) {
		return "", fmt.Errorf("environment id %q must be 8-32 lowercase letters or digits", envID)
	}
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return prefix + envID + "_" + base64.RawURLEncoding.EncodeToString(b), nil
}

// Hash is what a Control Plane stores instead of the token.
func Hash(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}
