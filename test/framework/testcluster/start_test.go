package testcluster_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/nexo-io/nexo-edge/test/framework/testcluster"
)

// A start that fails early returns an actionable error, removes the state folder it made, and
// does not panic in its own cleanup.
func TestStartWithoutBinariesFailsCleanly(t *testing.T) {
	empty := t.TempDir()
	t.Setenv("KUBEBUILDER_ASSETS", empty)
	tmp := t.TempDir() // the state folder is made under $TMPDIR
	t.Setenv("TMPDIR", tmp)

	c, err := testcluster.Start(context.Background(), testcluster.Options{BinDir: empty})
	if err == nil {
		_ = c.Stop()
		t.Fatal("Start succeeded without etcd and kube-apiserver")
	}
	if c != nil {
		t.Errorf("Start returned a cluster with its error: %+v", c)
	}
	if !strings.Contains(err.Error(), "make cluster-tools") {
		t.Errorf("error %q does not say how to get the binaries", err)
	}
	left, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range left {
		t.Errorf("state folder %s left behind", e.Name())
	}
}
