package authz

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/nexo-io/nexo-edge/controlplane/targeting"
)

// The capability table, every role × every action: what docs/controlplane.md states.
func TestCapabilityMatrix(t *testing.T) {
	// y: may; -: may not. Columns in the order of Roles.
	want := map[Action]string{
		ManagePrincipals:      "y---",
		ManageEnvironments:    "y---",
		SetEnvironmentLabels:  "y---",
		ManageNamespaceTarget: "y---",
		ManageProjects:        "y---",
		SetStage:              "yy--",
		ShareNamespaceTargets: "y---",
		Deploy:                "yyy-",
		Rollout:               "yyy-",
		Uninstall:             "yy--",
		ReadTargets:           "yyyy",
		ReadAudit:             "y---",
		ReadEntitlement:       "y---",
		CreateRevision:        "yyy-",
		ReadChanges:           "yyyy",
		Preview:               "yyy-",
		Promote:               "yyy-",
		ApprovePromotion:      "yy--",
		Rollback:              "yy--",
		OverrideCompatibility: "yy--",
		FreezeEnvironment:     "y---",
		FreezeStage:           "yy--",
		ReadHealth:            "yyyy",
	}
	if len(want) != len(Actions) {
		t.Fatalf("%d actions, the table has %d", len(Actions), len(want))
	}
	for _, a := range Actions {
		got := ""
		for _, r := range targeting.Roles {
			if Can(r, a) {
				got += "y"
			} else {
				got += "-"
			}
		}
		if got != want[a] {
			t.Errorf("%s: %s, want %s (roles %v)", a, got, want[a], targeting.Roles)
		}
	}
	if Can("owner", Deploy) {
		t.Error("an unknown role may deploy")
	}
}

// docs/controlplane.md's capability table says what Can says.
func TestCapabilityTableIsDocumented(t *testing.T) {
	raw, err := os.ReadFile("../../docs/controlplane.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := 0
	for _, line := range strings.Split(string(raw), "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		action := Action(strings.Trim(strings.Fields(cells[0])[0], "`"))
		if !slices.Contains(Actions, action) {
			continue
		}
		rows++
		for i, r := range targeting.Roles {
			doc := strings.TrimSpace(cells[i+1]) == "yes"
			if doc != Can(r, action) {
				t.Errorf("docs/controlplane.md says %s may %s: %v; the code: %v", r, action, doc, Can(r, action))
			}
		}
	}
	if rows != len(Actions) {
		t.Errorf("docs/controlplane.md's table has %d of the %d actions", rows, len(Actions))
	}
}
