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

// The inventory capabilities are advertised only for the fields a heartbeat fills, and the
// promotion contract only with all four.
func TestReportedCapabilitiesFollowTheFields(t *testing.T) {
	full := &protocol.Heartbeat{BundleVersion: "0.3.0", InstalledKinds: []string{"NexoProxy"}, SchemaFingerprint: "abc",
		PipelineKinds: map[string][]string{"request": {"NexoRateLimit"}}}
	if got := reportedCapabilities(full); !slices.Equal(got, []string{protocol.CapBundleVersion, protocol.CapCRDKinds,
		protocol.CapSchemaFingerprint, protocol.CapPipelineKinds, protocol.CapPromotionContract}) {
		t.Errorf("a full heartbeat advertises %v", got)
	}
	noOperator := *full
	noOperator.BundleVersion = ""
	if got := reportedCapabilities(&noOperator); slices.Contains(got, protocol.CapBundleVersion) || slices.Contains(got, protocol.CapPromotionContract) {
		t.Errorf("without a bundle version: %v", got)
	}
	if got := reportedCapabilities(&protocol.Heartbeat{}); len(got) != 0 {
		t.Errorf("an empty heartbeat advertises %v", got)
	}
}
