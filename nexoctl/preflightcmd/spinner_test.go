package preflightcmd

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nexo-io/nexo-edge/preflight"
	"github.com/nexo-io/nexo-edge/test/framework/terminal"
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
	out := terminal.Capture(t, func(tty *os.File) {
		opts, stop := spinnerTo(tty, true)
		if r := preflight.RunWith(context.Background(), &preflight.Env{}, cats, opts); r.Status != preflight.OK {
			t.Errorf("report %+v", r)
		}
		stop()
	})
	if !strings.Contains(out, "flaky thing is up  (retrying)") {
		t.Errorf("terminal output %q: no line for the retried check", out)
	}
	// The line is gone once the check passed: the last frame drawn holds no check.
	if last := out[strings.LastIndex(out, "\r"):]; strings.Contains(last, "flaky") {
		t.Errorf("the retried check's line stays after it passed: %q", out)
	}
	var log bytes.Buffer
	tries = 0
	opts, stop := spinnerTo(&log, false)
	preflight.RunWith(context.Background(), &preflight.Env{}, cats, opts)
	stop()
	if log.Len() != 0 {
		t.Errorf("off a terminal the spinner wrote %q", log.String())
	}
}
