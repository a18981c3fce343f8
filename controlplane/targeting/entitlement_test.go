package targeting

import (
	"strings"
	"testing"
	"time"
)

func TestAllowsDeploy(t *testing.T) {
	now := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	valid := &Entitlement{MaxProxies: 3, ExpiresAt: now.Add(time.Hour)}
	for _, c := range []struct {
		name             string
		e                *Entitlement
		deployed, adding int
		want             string // "" allows
	}{
		{"within", valid, 1, 2, ""},
		{"a redeploy adds nothing", valid, 3, 0, ""},
		{"one too many", valid, 2, 2, "allows 3 proxies: 2 deployed and 2 new in this deploy would make 4"},
		{"none", nil, 0, 1, "has no license entitlement"},
		{"expired", &Entitlement{MaxProxies: 3, ExpiresAt: now}, 0, 1, "expired at 2026-12-05T00:00:00Z"},
		{"zero proxies", &Entitlement{MaxProxies: 0, ExpiresAt: now.Add(time.Hour)}, 0, 1, "allows 0 proxies"},
	} {
		err := AllowsDeploy(c.e, "acme", now, c.deployed, c.adding)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	if err := (Entitlement{MaxProxies: -1, ExpiresAt: now}).Validate(); err == nil {
		t.Error("a negative maxProxies was accepted")
	}
	if err := (Entitlement{MaxProxies: 1}).Validate(); err == nil {
		t.Error("an entitlement without expiry was accepted")
	}
}
