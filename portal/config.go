package portal

import (
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/corral-dev/corral-vdi-portal/auth"
)

// Config is the portal's configuration: every setting is a flag of
// `corral-vdi-portal serve` and a CORRAL_VDI_* environment variable.
type Config struct {
	Listen          string
	DataDir         string
	Backend         string
	Auth            []string
	TrustedProxies  []netip.Prefix
	Admins          []string
	DisconnectGrace time.Duration
	MaxSession      time.Duration
	IdleTimeout     time.Duration
	// DemoPoolSize is the size of the demo pool made on a first run.
	DemoPoolSize int
	// StopDesktopsOnExit stops local desktops when the portal exits; by
	// default they keep running and the next start re-adopts them.
	StopDesktopsOnExit bool
}

// ParseConfig reads flags from args, with defaults taken from the
// environment (getenv) and then from built-in defaults.
func ParseConfig(args []string, getenv func(string) string) (Config, error) {
	env := func(name, def string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return def
	}
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	var c Config
	var authModes, proxies, admins, grace, maxSession, idle, demo, stopOnExit string
	fs.StringVar(&c.Listen, "listen", env("CORRAL_VDI_LISTEN", "127.0.0.1:8080"), "HTTP listen address (CORRAL_VDI_LISTEN)")
	fs.StringVar(&c.DataDir, "data-dir", env("CORRAL_VDI_DATA_DIR", defaultDataDir(getenv)), "database and local desktops' state (CORRAL_VDI_DATA_DIR)")
	fs.StringVar(&c.Backend, "backend", env("CORRAL_VDI_BACKEND", "local"), "which backend runs desktops: local (CORRAL_VDI_BACKEND)")
	fs.StringVar(&authModes, "auth", env("CORRAL_VDI_AUTH", "tailscale,dev"), "identity modes, comma-separated: tailscale, dev (CORRAL_VDI_AUTH)")
	fs.StringVar(&proxies, "trusted-proxies", env("CORRAL_VDI_TRUSTED_PROXIES", "127.0.0.1/32,::1/128"), "where Tailscale identity headers are believed (CORRAL_VDI_TRUSTED_PROXIES)")
	fs.StringVar(&admins, "admins", env("CORRAL_VDI_ADMINS", ""), "admin logins, comma-separated (CORRAL_VDI_ADMINS)")
	fs.StringVar(&grace, "disconnect-grace", env("CORRAL_VDI_DISCONNECT_GRACE", "15m"), "reclaim after the last console closes (CORRAL_VDI_DISCONNECT_GRACE)")
	fs.StringVar(&maxSession, "max-session", env("CORRAL_VDI_MAX_SESSION", "off"), "longest claim, or off (CORRAL_VDI_MAX_SESSION)")
	fs.StringVar(&idle, "idle-timeout", env("CORRAL_VDI_IDLE_TIMEOUT", "off"), "reclaim after no user input, or off (CORRAL_VDI_IDLE_TIMEOUT)")
	fs.StringVar(&demo, "demo-pool-size", env("CORRAL_VDI_DEMO_POOL_SIZE", "3"), "members of the demo pool made on a first run; 0 for none (CORRAL_VDI_DEMO_POOL_SIZE)")
	fs.StringVar(&stopOnExit, "stop-desktops-on-exit", env("CORRAL_VDI_STOP_DESKTOPS_ON_EXIT", "false"), "stop local desktops when the portal exits (CORRAL_VDI_STOP_DESKTOPS_ON_EXIT)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))
	}
	var err error
	if c.TrustedProxies, err = auth.ParsePrefixes(proxies); err != nil {
		return c, fmt.Errorf("CORRAL_VDI_TRUSTED_PROXIES: %w", err)
	}
	c.Auth, c.Admins = splitList(authModes), splitList(admins)
	if c.DisconnectGrace, err = parseDuration(grace); err != nil {
		return c, fmt.Errorf("CORRAL_VDI_DISCONNECT_GRACE: %w", err)
	}
	if c.MaxSession, err = parseDuration(maxSession); err != nil {
		return c, fmt.Errorf("CORRAL_VDI_MAX_SESSION: %w", err)
	}
	if c.IdleTimeout, err = parseDuration(idle); err != nil {
		return c, fmt.Errorf("CORRAL_VDI_IDLE_TIMEOUT: %w", err)
	}
	if c.DemoPoolSize, err = strconv.Atoi(demo); err != nil || c.DemoPoolSize < 0 {
		return c, fmt.Errorf("CORRAL_VDI_DEMO_POOL_SIZE: %q is not a count", demo)
	}
	if c.StopDesktopsOnExit, err = strconv.ParseBool(stopOnExit); err != nil {
		return c, fmt.Errorf("CORRAL_VDI_STOP_DESKTOPS_ON_EXIT: %q is not true or false", stopOnExit)
	}
	if c.Backend != "local" {
		return c, fmt.Errorf("CORRAL_VDI_BACKEND: %q is not available in this build (use local)", c.Backend)
	}
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		return c, fmt.Errorf("CORRAL_VDI_LISTEN: %w", err)
	}
	return c, nil
}

// parseDuration accepts a Go duration or "off" (zero).
func parseDuration(s string) (time.Duration, error) {
	if s == "off" || s == "" || s == "0" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%q is not a duration like 15m or 2h, nor off", s)
	}
	return d, nil
}

func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}

func defaultDataDir(getenv func(string) string) string {
	if x := getenv("XDG_DATA_HOME"); x != "" {
		return filepath.Join(x, "corral-vdi")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "corral-vdi-data"
	}
	return filepath.Join(home, ".local", "share", "corral-vdi")
}

// isLoopback reports whether addr listens on loopback only.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}
