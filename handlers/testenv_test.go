package handlers

import (
	"context"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/corral-dev/corral-vdi-portal/auth"
	"github.com/corral-dev/corral-vdi-portal/local"
	"github.com/corral-dev/corral-vdi-portal/static"
	"github.com/corral-dev/corral-vdi-portal/store"
)

// testEnv is the real parts handlers tests build on: a database in a
// folder of the test's own, Tailscale-header identity believed from
// 127.0.0.1, the embedded assets, and (on request) a local backend.
type testEnv struct {
	dir     string
	log     *slog.Logger
	db      *store.DB
	auth    *auth.Authenticator
	assets  *static.Assets
	backend *local.Backend // nil unless asked for
}

// testEnvConfig says what a testEnv holds beyond the database.
type testEnvConfig struct {
	// Admins are the admin logins.
	Admins []string
	// Backend starts a local backend; its desktops stop with the test.
	Backend bool
}

// mustTestEnv returns a testEnv, torn down when tb ends.
func mustTestEnv(tb testing.TB, cfg testEnvConfig) *testEnv {
	tb.Helper()
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "chd") // short: desktops' sockets live under it
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	e := &testEnv{dir: dir, log: slog.New(slog.DiscardHandler)}
	if e.db, err = store.Open(ctx, filepath.Join(dir, "portal.db")); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { e.db.Close() })
	if cfg.Backend {
		if e.backend, err = local.New(ctx, local.Config{DB: e.db, Dir: filepath.Join(dir, "local"), Log: e.log}); err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { e.backend.StopAll(context.Background()) })
	}
	e.auth, err = auth.New(auth.Config{Modes: []string{auth.ModeTailscale}, Admins: cfg.Admins,
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}, KeyFile: filepath.Join(dir, "cookie.keys"), Log: e.log})
	if err != nil {
		tb.Fatal(err)
	}
	if e.assets, err = static.New(); err != nil {
		tb.Fatal(err)
	}
	return e
}
