package portal

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
)

// Command runs the subcommand args names: serve (the default), help, or
// an admin subcommand (cliCommands) that talks to the running portal.
func Command(ctx context.Context, args []string, getenv func(string) string) error {
	name := "serve"
	if len(args) > 0 && args[0] != "" && args[0][0] != '-' {
		name, args = args[0], args[1:]
	}
	switch name {
	case "serve":
		cfg, err := ParseConfig(args, getenv)
		if errors.Is(err, flag.ErrHelp) {
			return nil
		} else if err != nil {
			return err
		}
		m := &Main{Config: cfg, Log: slog.New(slog.NewTextHandler(os.Stderr, nil))}
		defer m.Close()
		if err := m.Open(ctx); err != nil {
			return err
		}
		return m.Run(ctx)
	case "help":
		fmt.Println("usage: corral-vdi-portal [serve] [flags]\n       corral-vdi-portal <admin subcommand> [flags]\n\n" +
			"serve runs the portal; `corral-vdi-portal serve -h` lists its flags, each with a CORRAL_VDI_* environment variable.\n\n" + cliUsage)
		return nil
	}
	if run, ok := cliCommands[name]; ok {
		err := run(ctx, cliEnv{getenv: getenv, out: os.Stdout, errOut: os.Stderr, in: os.Stdin}, args)
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	return fmt.Errorf("unknown command %q (try help)", name)
}
