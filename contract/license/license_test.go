package license_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nexo-io/nexo-edge/contract/license"
	"github.com/nexo-io/nexo-edge/contract/signature"
)

func TestIssueParse(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	trusted := map[string]ed25519.PublicKey{signature.KeyID(pub): pub}
	claims := license.Claims{Licensee: "Acme", ExpiresAt: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), Entitlements: []string{"NexoPIIMasking"}, MaxProxies: 3}
	doc, err := license.Issue(claims, priv)
	if err != nil {
		t.Fatal(err)
	}
	got, err := license.Parse(doc, trusted)
	if err != nil || got.Licensee != "Acme" || got.MaxProxies != 3 || !got.ExpiresAt.Equal(claims.ExpiresAt) {
		t.Fatalf("parse: %+v %v", got, err)
	}
	_, otherPriv, _ := ed25519.GenerateKey(rand.Reader)
	foreign, _ := license.Issue(claims, otherPriv)
	parts := strings.Split(doc, ".")
	tampered := strings.Join([]string{parts[0], parts[1], parts[2] + "x", parts[3]}, ".")
	for name, c := range map[string]struct {
		doc  string
		want error
	}{
		"foreign key": {foreign, license.ErrUnknownKey},
		"tampered":    {tampered, license.ErrSignature},
		"garbage":     {"hello", license.ErrMalformed},
	} {
		if _, err := license.Parse(c.doc, trusted); !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", name, err, c.want)
		}
		if _, err := license.Parse(c.doc, trusted); err != nil && strings.Contains(err.Error(), parts[2]) {
			t.Errorf("%s: error leaks the document", name)
		}
	}
}

func TestShippedKeys(t *testing.T) {
	if n := len(license.ShippedKeys()); n != 1 {
		t.Fatalf("%d shipped license keys, want 1", n)
	}
}
