package preflightcmd

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/nexo-io/nexo-edge/preflight"
)

// On a terminal a retried check shows a spinner line that is cleared when the check ends; off a
// terminal nothing is written (CI logs stay line-based).
func TestSpinnerWhileACheckRetries(t *testing.T) {
	tries := 0
	cats := []preflight.Category{{Name: "x", Checks: []preflight.Check{{ID: "flaky", Description: "flaky thing is up", RetryDeadline: 3 * time.Second,
		Run: func(context.Context, *preflight.Env) preflight.Outcome {
			tries++
			if tries < 3 {
				return preflight.Outcome{Status: preflight.Error, Message: "not yet"}
			}
			return preflight.Outcome{Status: preflight.OK}
		}}}}}
	var tty bytes.Buffer
	if r := preflight.RunWith(context.Background(), &preflight.Env{}, cats, spinnerTo(&tty, true)); r.Status != preflight.OK {
		t.Fatalf("report %+v", r)
	}
	out := tty.String()
	if strings.Count(out, "flaky thing is up (retrying)") != 2 || !strings.HasSuffix(out, "\r\x1b[K") {
		t.Errorf("terminal output %q", out)
	}
	var log bytes.Buffer
	tries = 0
	preflight.RunWith(context.Background(), &preflight.Env{}, cats, spinnerTo(&log, false))
	if log.Len() != 0 {
		t.Errorf("off a terminal the spinner wrote %q", log.String())
	}
}
