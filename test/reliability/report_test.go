package reliability_test

import (
	"testing"

	"github.com/nexo-io/nexo-edge/test/framework/reliabilityreport"
)

// figure records one line of the reliability report (make test-reliability prints the table).
func figure(t *testing.T, what, value string) {
	t.Helper()
	reliabilityreport.Figure(t, what, value)
}
