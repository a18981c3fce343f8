package progress

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nexo-io/nexo-edge/test/framework/terminal"
)

// Off a terminal each change of an item is one line, and an unchanged item writes nothing.
func TestOffATerminalEachChangeIsALine(t *testing.T) {
	var log bytes.Buffer
	d := Start(&log, Options{Title: "waiting"})
	d.Set([]Item{{Name: "nexo-operator", State: "0/1 available", Detail: "MinimumReplicasUnavailable"}, {Name: "nexo-manager", State: "0/1 available"}})
	d.Set([]Item{{Name: "nexo-operator", State: "0/1 available", Detail: "MinimumReplicasUnavailable"}, {Name: "nexo-manager", State: "1/1 available", Done: true}})
	d.Set([]Item{{Name: "nexo-operator", State: "stalled", Failed: true}, {Name: "nexo-manager", State: "1/1 available", Done: true}})
	d.Stop()
	want := "waiting: … nexo-operator  0/1 available  (MinimumReplicasUnavailable)\n" +
		"waiting: … nexo-manager  0/1 available\n" +
		"waiting: ✓ nexo-manager  1/1 available\n" +
		"waiting: ✗ nexo-operator  stalled\n"
	if log.String() != want {
		t.Errorf("log:\n%s\nwant:\n%s", log.String(), want)
	}
	var quiet bytes.Buffer
	q := Start(&quiet, Options{Quiet: true})
	q.Set([]Item{{Name: "x", State: "y"}})
	q.Stop()
	if quiet.Len() != 0 {
		t.Errorf("a quiet display wrote %q off a terminal", quiet.String())
	}
}

// On a terminal the items are drawn in place behind a spinner while they wait, and the last
// state stays on the screen after Stop, with ✓ and ✗.
func TestOnATerminalTheItemsSpinInPlace(t *testing.T) {
	out := terminal.Capture(t, func(tty *os.File) {
		d := Start(tty, Options{Terminal: true, Title: "Waiting for 2 proxies"})
		d.Set([]Item{{Name: "shop/orders", State: "Progressing 0/2"}, {Name: "shop/billing", State: "Ready 1/1", Done: true}})
		time.Sleep(400 * time.Millisecond) // a few spinner frames
		d.Set([]Item{{Name: "shop/orders", State: "Failed 0/2", Detail: "InvalidReference", Failed: true}, {Name: "shop/billing", State: "Ready 1/1", Done: true}})
		d.Stop()
	})
	for _, want := range []string{"Waiting for 2 proxies", "shop/orders  Progressing 0/2", "✓ shop/billing  Ready 1/1", "✗ shop/orders  Failed 0/2  (InvalidReference)"} {
		if !strings.Contains(out, want) {
			t.Errorf("the terminal never showed %q:\n%q", want, out)
		}
	}
	// The renderer redraws only the cells that change: the first frame comes with the line, the
	// next ones alone.
	frames := 0
	for _, f := range []string{"⣾", "⣽", "⣻", "⢿", "⡿", "⣟", "⣯", "⣷"} { // spinner.Dot
		if strings.Contains(out, f) {
			frames++
		}
	}
	if !strings.Contains(out, " shop/orders  Progressing 0/2") {
		t.Errorf("the waiting item was not drawn behind its spinner:\n%q", out)
	}
	if frames < 2 {
		t.Errorf("the waiting item showed %d spinner frames, want it to spin:\n%q", frames, out)
	}
}
