// Command controlplane is the reference Nexo Control Plane, for tests and local development.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/nexo-io/nexo-edge/controlplane/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := cli.NewRootCmd(os.Stdout).ExecuteContext(ctx)
	stop()
	if err != nil {
		os.Exit(1)
	}
}
