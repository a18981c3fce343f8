// Package syncbuffer is a bytes.Buffer that goroutines may write while a test reads it (a
// process's logs, a command's output).
package syncbuffer

import (
	"bytes"
	"sync"
)

// Buffer is safe for concurrent writes and reads.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String is what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
