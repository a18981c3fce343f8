// Command nexoctl installs, checks and inspects Nexo Edge on Kubernetes.
package main

import (
	"context"
	"os"
	"os/signal"

	"github.com/nexo-io/nexo-edge/nexoctl"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := nexoctl.Main(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
