package manager

import (
	"slices"
	"testing"

	"github.com/nexo-io/nexo-edge/contract/protocol"
)

// The Manager executes every command type of the table, advertises each one's capability, and
// has no handler outside the table.
func TestEveryCommandTypeHasAHandler(t *testing.T) {
	caps := commandCapabilities()
	for _, c := range protocol.Commands {
		if handlers[c.Name] == nil {
			t.Errorf("command type %s has no handler in the Manager", c.Name)
		}
		if !slices.Contains(caps, c.Capability) {
			t.Errorf("the Manager does not advertise %s", c.Capability)
		}
	}
	for name := range handlers {
		if !slices.Contains(protocol.CommandNames(), name) {
			t.Errorf("handler %s has no row in protocol.Commands", name)
		}
	}
}
