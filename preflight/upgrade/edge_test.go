package upgrade

import (
	"strings"
	"testing"
)

func TestEdgeFrom(t *testing.T) {
	for _, tc := range []struct {
		installed string
		ok        bool
		words     string
	}{
		{"", true, "first install"},
		{"0.3.0", true, "re-install"},
		{"0.2.0", true, "upgrades to 0.3.0 in one step"},
		{"0.2.7", true, "in one step"},
		{"0.1.9", false, "no upgrade edge from 0.1.9"},
		{"0.4.0", false, "a downgrade is refused"},
		{"latest", false, "not a version"},
	} {
		e := EdgeFrom(tc.installed, "0.3.0", ">=0.2.0 <0.3.0")
		if e.OK != tc.ok || !strings.Contains(e.Message, tc.words) {
			t.Errorf("%q: %+v, want ok=%v and %q", tc.installed, e, tc.ok, tc.words)
		}
	}
}
