// Package reliability_test injects faults into the product running as the chart installs it
// (the operator and the Manager as local processes under the chart's ServiceAccounts, on a full
// local cluster) and checks what survives: kill -9 at seeded moments, an API server restart, a
// throttled API server, and a faulty Control Plane. make test-reliability runs it and prints the
// figures each test records (see report_test.go).
package reliability_test

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/nexo-io/nexo-edge/test/framework/testcluster"
)

var (
	proxies = flag.Int("proxies", 200, "NexoProxies per namespace in the crash-injection suite (the long variant: 1000)")
	kills   = flag.Int("kills", 10, "kill -9 of the operator in the crash-injection suite (at least 10)")
	seed    = flag.Int64("seed", 0, "seed of the kill schedule (0: from the clock; the seed used is reported)")
	bins    = map[string]string{}
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	flag.Parse()
	dir, err := os.MkdirTemp("", "nexo-reliability-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	for _, name := range []string{"operator", "manager", "controlplane"} {
		bins[name] = filepath.Join(dir, name)
		cmd := exec.Command("go", "build", "-o", bins[name], "./cmd/"+name)
		cmd.Dir = testcluster.RepoRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build %s: %v\n%s", name, err, out)
			return 1
		}
	}
	return m.Run()
}
