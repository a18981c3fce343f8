package main

import (
	"strings"
	"testing"

	"github.com/blang/semver/v4"
)

// The CSV's edge: it replaces the newest older release and skips catalog.UpgradesFrom, which
// must hold that release and not the version itself.
func TestEdgeFor(t *testing.T) {
	rels := []released{{Version: semver.MustParse("0.2.0")}, {Version: semver.MustParse("0.2.1")}}
	e, err := edgeFor("0.3.0", ">=0.2.0 <0.3.0", rels)
	if err != nil || e.Replaces != "nexo-operator.v0.2.1" || e.SkipRange != ">=0.2.0 <0.3.0" {
		t.Errorf("edge %+v %v", e, err)
	}
	if e, err := edgeFor("0.2.0", "", nil); err != nil || e != (upgradeEdge{}) {
		t.Errorf("the first release: %+v %v", e, err)
	}
	for _, tc := range []struct{ version, from, want string }{
		{"0.3.0", "", "catalog.UpgradesFrom is empty"},
		{"0.3.0", ">=0.1.0 <0.2.0", "must hold the previous release 0.2.1"},
		{"0.3.0", ">=0.2.0", "not 0.3.0 itself"},
		{"0.2.0", ">=0.1.0 <0.2.0", "no release older than 0.2.0"},
	} {
		r := rels
		if tc.version == "0.2.0" {
			r = nil
		}
		if _, err := edgeFor(tc.version, tc.from, r); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s from %q: %v, want %q", tc.version, tc.from, err, tc.want)
		}
	}
}
