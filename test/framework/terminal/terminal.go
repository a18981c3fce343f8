// Package terminal runs code against a pseudo-terminal and returns what reached the terminal,
// escapes included: what a user at a terminal would have received.
package terminal

import (
	"bytes"
	"io"
	"os"
	"testing"

	"github.com/creack/pty"
)

// Capture calls run with the terminal end of a new pseudo-terminal and returns everything written
// to it once run returns.
func Capture(t testing.TB, run func(tty *os.File)) string {
	t.Helper()
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	var screen bytes.Buffer
	copied := make(chan struct{})
	go func() { _, _ = io.Copy(&screen, ptmx); close(copied) }()
	run(tty)
	tty.Close()
	<-copied
	return screen.String()
}
