package preflightcmd

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"

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
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	var screen bytes.Buffer
	copied := make(chan struct{})
	go func() { _, _ = io.Copy(&screen, ptmx); close(copied) }()
	opts, stop := spinnerTo(tty, true)
	if r := preflight.RunWith(context.Background(), &preflight.Env{}, cats, opts); r.Status != preflight.OK {
		t.Fatalf("report %+v", r)
	}
	stop()
	tty.Close()
	<-copied
	out := screen.String()
	if !strings.Contains(out, "flaky thing is up  (retrying)") {
		t.Errorf("terminal output %q: no line for the retried check", out)
	}
	// The line is gone once the check passed: the last frame drawn holds no check.
	if last := out[strings.LastIndex(out, "\r"):]; strings.Contains(last, "flaky") {
		t.Errorf("the retried check's line stays after it passed: %q", out)
	}
	var log bytes.Buffer
	tries = 0
	opts, stop = spinnerTo(&log, false)
	preflight.RunWith(context.Background(), &preflight.Env{}, cats, opts)
	stop()
	if log.Len() != 0 {
		t.Errorf("off a terminal the spinner wrote %q", log.String())
	}
}
