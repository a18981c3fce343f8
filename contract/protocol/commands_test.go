package protocol_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nexo-io/nexo-edge/contract/protocol"
)

// Every row of the command table has its row in docs/protocol.md, saying what the table says.
func TestEveryCommandTypeIsDocumented(t *testing.T) {
	// go test runs in the package's folder.
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "protocol.md"))
	if err != nil {
		t.Fatal(err)
	}
	yes := func(b bool) string {
		if b {
			return "yes"
		}
		return "no"
	}
	seen := map[string]bool{}
	for _, c := range protocol.Commands {
		if seen[c.Name] || c.Name == "" || c.Capability == "" || c.Summary == "" {
			t.Errorf("row %+v: a name given once, a capability and a summary are required", c)
		}
		seen[c.Name] = true
		set := "unchanged"
		switch {
		case c.EntersDeployedSet && c.LeavesDeployedSet:
			t.Errorf("%s both enters and leaves the deployed set", c.Name)
		case c.EntersDeployedSet:
			set = "enters, when applied"
		case c.LeavesDeployedSet:
			set = "leaves, when queued"
		}
		if c.CountsAgainstEntitlement && !c.CarriesProxies {
			t.Errorf("%s counts against the entitlement but carries no proxies", c.Name)
		}
		if c.ChangesNothing && (c.CarriesProxies || c.EntersDeployedSet || c.LeavesDeployedSet) {
			t.Errorf("%s changes nothing but carries proxies or moves the deployed set", c.Name)
		}
		row := fmt.Sprintf("| `%s` | `%s` | %s | %s | %s | %s | %s | %s |", c.Name, c.Capability, yes(c.CarriesProxies),
			yes(c.CountsAgainstEntitlement), yes(c.MayAddProxies), set, yes(c.ChangesNothing), c.Summary)
		if !strings.Contains(string(doc), row+"\n") {
			t.Errorf("docs/protocol.md, \"Commands\", lacks the row\n%s", row)
		}
	}
	if _, ok := protocol.CommandTypeOf(protocol.WorkloadConfig); ok {
		t.Error("workload-config is refused by both sides, not a command type")
	}
}
