package portal

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
)

// Command runs the subcommand args name: serve (the default) or help.
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
		fmt.Println("usage: corral-vdi-portal [serve] [flags]\n\nRun `corral-vdi-portal serve -h` for the flags; each has a CORRAL_VDI_* environment variable.")
		return nil
	}
	return fmt.Errorf("unknown command %q (try help)", name)
}
