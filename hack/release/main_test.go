package main

import (
	"fmt"
	"os"
	"testing"
)

// TestMain lets the tests, which build the same commit's binaries in several releases, link
// each binary once (reuse); TestImagesAreReproducible turns it off to build twice.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "nexo-release-builds-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	reuse = dir
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}
