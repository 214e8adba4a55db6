package portal

import (
	"context"
	"log/slog"
	"os"
)

// Serve is `corral-vdi-portal serve`: it reads the configuration from args
// and getenv, runs the portal until ctx ends and closes it. After -h it
// returns flag.ErrHelp, which is no failure.
func Serve(ctx context.Context, args []string, getenv func(string) string) error {
	cfg, err := ParseConfig(args, getenv)
	if err != nil {
		return err
	}
	m := &Main{Config: cfg, Log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: cfg.Server.LogLevel}))}
	defer m.Close()
	if err := m.Open(ctx); err != nil {
		return err
	}
	return m.Run(ctx)
}
