package portal

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/corral-dev/corral-vdi-portal/connid"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// unixPrefix marks a Unix socket in CORRAL_VDI_LISTEN.
const unixPrefix = "unix:"

// parseListen splits CORRAL_VDI_LISTEN: one TCP address, and any number
// of unix:/absolute/path entries, comma-separated.
func parseListen(s string) (tcp string, unixPaths []string, err error) {
	for _, e := range strings.Split(s, ",") {
		e = strings.TrimSpace(e)
		switch {
		case e == "":
		case strings.HasPrefix(e, unixPrefix):
			path := strings.TrimPrefix(e, unixPrefix)
			if !filepath.IsAbs(path) || filepath.Clean(path) != path {
				return "", nil, fmt.Errorf("CORRAL_VDI_LISTEN: %q: a Unix socket needs a clean absolute path, e.g. unix:/run/corral-vdi/http.sock", e)
			}
			if len(path) > maxSocketPath {
				return "", nil, fmt.Errorf("CORRAL_VDI_LISTEN: %q: the path is longer than the %d bytes Linux allows a Unix socket; choose a shorter one", e, maxSocketPath)
			}
			unixPaths = append(unixPaths, path)
		case tcp != "":
			return "", nil, fmt.Errorf("CORRAL_VDI_LISTEN: %q and %q: give one TCP address (and any number of unix:/path sockets)", tcp, e)
		default:
			if _, _, err := net.SplitHostPort(e); err != nil {
				return "", nil, fmt.Errorf("CORRAL_VDI_LISTEN: %q: %w (e.g. 127.0.0.1:8080)", e, err)
			}
			tcp = e
		}
	}
	if tcp == "" {
		return "", nil, fmt.Errorf("CORRAL_VDI_LISTEN: %q names no TCP address; give one, e.g. 127.0.0.1:8080,unix:/run/corral-vdi/http.sock", s)
	}
	return tcp, unixPaths, nil
}

// listenUnix opens the Unix socket path for a proxy on this host. Any
// local user may connect (as to the loopback address); a desktop's uid is
// refused its trust by the connection's SO_PEERCRED, and the folder's
// permissions narrow who reaches it further. A socket left by a portal
// that is gone is replaced; a live one is an error.
func listenUnix(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("CORRAL_VDI_LISTEN unix:%s: %w", path, err)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, fmt.Errorf("CORRAL_VDI_LISTEN unix:%s exists and is not a socket: remove it, or choose another path", path)
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("CORRAL_VDI_LISTEN unix:%s: another process serves this socket (is another portal running?); stop it or choose another path", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("CORRAL_VDI_LISTEN unix:%s: remove the stale socket: %w", path, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("CORRAL_VDI_LISTEN unix:%s: %w", path, err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("CORRAL_VDI_LISTEN unix:%s: %w", path, err)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		ln.Close()
		return nil, fmt.Errorf("CORRAL_VDI_LISTEN unix:%s: %w", path, err)
	}
	return ln, nil
}

// listen opens the TCP listener and the Unix sockets of CORRAL_VDI_LISTEN,
// each behind a connid.Listener (who opened each connection, found off
// the accept loop) and the per-client connection caps. With local
// desktops on a network it first refuses a trusted-proxy prefix that
// covers their way out (checkTrustedProxies).
func (m *Main) listen() error {
	c := m.Config
	if c.Server.Backend != BackendKube && c.Local.DesktopNetwork != string(vdi.NetworkNone) { // some pool may have outbound network
		host, err := hostAddrs()
		if err != nil {
			return fmt.Errorf("list this host's addresses (to check CORRAL_VDI_TRUSTED_PROXIES): %w", err)
		}
		if err := checkTrustedProxies(c.Auth.TrustedProxies, host); err != nil {
			return err
		}
	}
	cls := classifier(m.sandbox)
	ln, err := net.Listen("tcp", c.Server.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w (is another portal running? set CORRAL_VDI_LISTEN)", c.Server.Listen, err)
	}
	m.ln = newConnLimiter(connid.NewListener(ln, cls), DefaultMaxConnsPerClient, DefaultMaxConnsPerProxy, c.Auth.TrustedProxies)
	for _, path := range c.Server.ListenUnix {
		ln, err := listenUnix(path)
		if err != nil {
			return err
		}
		m.unixLns = append(m.unixLns, newConnLimiter(connid.NewListener(ln, cls), DefaultMaxConnsPerClient, DefaultMaxConnsPerProxy, c.Auth.TrustedProxies))
		m.Log.Info("listening for a proxy on this host", "socket", path)
	}
	return nil
}
