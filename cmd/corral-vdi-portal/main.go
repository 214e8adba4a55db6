// Command corral-vdi-portal serves pools of desktops that people claim and
// use in a browser. `corral-vdi-portal serve` (the default) runs the portal.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/corral-dev/corral-vdi-portal/portal"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := portal.Command(ctx, os.Args[1:], os.Getenv); err != nil {
		fmt.Fprintln(os.Stderr, "corral-vdi-portal:", err)
		os.Exit(portal.ExitCode(err))
	}
}
