package controlplane

import (
	"slices"
	"testing"

	"github.com/nexo-io/nexo-edge/contract/protocol"
)

// The Control Plane prepares every command type of the table, and nothing else.
func TestEveryCommandTypeHasAPreparer(t *testing.T) {
	for _, c := range protocol.Commands {
		if preparers[c.Name] == nil {
			t.Errorf("command type %s has no preparer in the Control Plane", c.Name)
		}
	}
	for name := range preparers {
		if !slices.Contains(protocol.CommandNames(), name) {
			t.Errorf("preparer %s has no row in protocol.Commands", name)
		}
	}
}
