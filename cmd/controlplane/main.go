// Command controlplane is the reference Nexo Control Plane, for tests and local development.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/nexo-io/nexo-edge/internal/controlplanecmd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := controlplanecmd.NewRootCmd(os.Stdout).ExecuteContext(ctx)
	stop()
	if err != nil {
		os.Exit(1)
	}
}
