// Command corral-vdi-portal serves pools of desktops that people claim and
// use in a browser. `corral-vdi-portal serve` (the default) runs the portal;
// doctor checks a machine or cluster for it; encoder serves H.264
// encoders to a portal that cannot run them (its Kubernetes sidecar);
// version prints the release
// and commit; the admin subcommands (package
// cli) talk to the running portal.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/corral-dev/corral-vdi-portal/cli"
	"github.com/corral-dev/corral-vdi-portal/portal"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "corral-vdi-portal:", err)
		os.Exit(cli.ExitCode(err))
	}
}

// run runs the subcommand args names: serve (the default), doctor,
// encoder, version, help, or an admin subcommand.
func run(ctx context.Context, args []string) error {
	name := "serve"
	if len(args) > 0 && args[0] != "" && args[0][0] != '-' {
		name, args = args[0], args[1:]
	}
	switch name {
	case "serve":
		return portal.Serve(ctx, args, os.Getenv)
	case "doctor":
		return portal.Doctor(ctx, cli.Stdio(), args)
	case "encoder":
		return portal.Encoder(ctx, args)
	case "version":
		portal.PrintVersion(os.Stdout)
		return nil
	case "help":
		fmt.Println("usage: corral-vdi-portal [serve] [flags]\n       corral-vdi-portal encoder -socket PATH\n       corral-vdi-portal version\n       corral-vdi-portal <admin subcommand> [flags]\n\n" +
			"serve runs the portal; `corral-vdi-portal serve -h` lists its flags, each with a CORRAL_VDI_* environment variable.\n" +
			"encoder serves H.264 encoders on a Unix socket to a portal beside it (CORRAL_VDI_H264=unix:PATH): the Kubernetes encoder sidecar.\n\n" + cli.Usage)
		return nil
	}
	return cli.Run(ctx, cli.Stdio(), name, args)
}
