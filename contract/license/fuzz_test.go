package license_test

import (
	"crypto/ed25519"
	"strings"
	"testing"
	"time"

	"github.com/nexo-io/nexo-edge/contract/license"
)

// FuzzParse: arbitrary documents never panic; every refusal has a reason that does not repeat
// the document; anything accepted was signed by the trusted key.
func FuzzParse(f *testing.F) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	good, _ := license.Issue(license.Claims{Licensee: "Acme", ExpiresAt: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), MaxProxies: 3}, priv)
	f.Add(good)
	f.Add("nexo-license-v1.a.b.c")
	f.Add("")
	f.Add(strings.Replace(good, ".", "..", 1))
	trusted := map[string]ed25519.PublicKey{}
	for id := range license.ShippedKeys() {
		trusted[id] = license.ShippedKeys()[id]
	}
	parts := strings.Split(good, ".")
	trusted[parts[1]] = pub
	f.Fuzz(func(t *testing.T, doc string) {
		c, err := license.Parse(doc, trusted)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("a refusal without a reason")
			}
			if len(doc) > 24 && strings.Contains(err.Error(), doc) {
				t.Fatal("the error repeats the license document")
			}
			return
		}
		if c.Licensee == "" || c.MaxProxies < 1 || c.ExpiresAt.IsZero() {
			t.Fatalf("accepted incomplete claims %+v", c)
		}
		if license.DocumentID(doc) == "" {
			t.Fatal("an accepted document has no id")
		}
	})
}
