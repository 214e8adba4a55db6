package portal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/corral-dev/corral-vdi-portal/api"
	"github.com/corral-dev/corral-vdi-portal/auth"
	"github.com/corral-dev/corral-vdi-portal/connid"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// maxSocketPath is the longest Unix socket path Linux accepts (sun_path
// holds 108 bytes with the terminating NUL).
const maxSocketPath = 107

// adminSocketPath resolves CORRAL_VDI_ADMIN_SOCKET: empty means the data
// directory's admin.sock, "off" means none (returned as "").
func adminSocketPath(setting, dataDir string) string {
	switch setting {
	case "off":
		return ""
	case "":
		return filepath.Join(dataDir, api.AdminSocketName)
	}
	return setting
}

// adminSocket serves the /api/ routes on a Unix socket to local admins:
// the kernel names the peer's uid (SO_PEERCRED), and root or the portal's
// own user gets the admin identity cli:<user>. The admin CLI talks to the
// running portal through it, so one process keeps owning desktops and
// leases.
type adminSocket struct {
	path string
	ln   net.Listener
	srv  *http.Server
	api  http.Handler
	log  *slog.Logger
	// portalURL is the portal's web address, told to the CLI on every
	// answer (api.PortalURLHeader).
	portalURL string
}

// openAdminSocket listens on path (nil, nil when path is empty), replacing
// a stale socket that nothing answers on. h is the portal's handler.
func openAdminSocket(path string, h http.Handler, log *slog.Logger) (*adminSocket, error) {
	if path == "" {
		return nil, nil
	}
	if len(path) > maxSocketPath {
		return nil, fmt.Errorf("admin socket %s: the path is longer than %d bytes; set CORRAL_VDI_ADMIN_SOCKET to a shorter path, or off", path, maxSocketPath)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("admin socket: %w", err)
	}
	if live, err := removeStaleSocket(path); err != nil {
		return nil, err
	} else if live {
		// Portals may share a data directory (and so the claims): the
		// other one's socket administers the same state.
		log.Warn("another portal serves the admin socket of this data directory; this one serves none (set CORRAL_VDI_ADMIN_SOCKET to give it its own)", "path", path)
		return nil, nil
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("admin socket: %w (set CORRAL_VDI_ADMIN_SOCKET to another path, or off)", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("admin socket: %w", err)
	}
	a := &adminSocket{path: path, ln: ln, api: h, log: log}
	a.srv = &http.Server{
		Handler:           a,
		ReadHeaderTimeout: 10 * time.Second,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, peerKey{}, peerOf(c))
		},
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	log.Info("admin socket for the CLI", "path", path)
	return a, nil
}

// removeStaleSocket removes a socket left by a portal that is gone, and
// reports whether a live portal answers on path instead. A file that is no
// socket is an error.
func removeStaleSocket(path string) (live bool, err error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	} else if err != nil {
		return false, fmt.Errorf("admin socket: %w", err)
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return false, fmt.Errorf("admin socket %s exists and is not a socket: remove it, or set CORRAL_VDI_ADMIN_SOCKET to another path", path)
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	switch {
	case err == nil:
		c.Close()
		return true, nil
	case !errors.Is(err, syscall.ECONNREFUSED):
		return false, fmt.Errorf("admin socket %s: %w; remove it if no portal uses it, or set CORRAL_VDI_ADMIN_SOCKET to another path", path, err)
	}
	if err := os.Remove(path); err != nil {
		return false, fmt.Errorf("admin socket: remove stale %s: %w", path, err)
	}
	return false, nil
}

// serve serves requests in contexts derived from ctx until Close; a nil
// socket (off) does nothing.
func (a *adminSocket) serve(ctx context.Context) {
	if a == nil {
		return
	}
	a.srv.BaseContext = func(net.Listener) context.Context { return ctx }
	if err := a.srv.Serve(a.ln); !errors.Is(err, http.ErrServerClosed) && !errors.Is(err, net.ErrClosed) {
		a.log.Error("admin socket stopped", "err", err)
	}
}

// Close lets running requests finish (for up to 10 seconds), stops
// listening and removes the socket file; nil does nothing.
func (a *adminSocket) Close() error {
	if a == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := a.srv.Shutdown(ctx)
	// A Unix listener unlinks the socket file it made when it closes;
	// Shutdown closed it already if serve had started.
	if cerr := a.ln.Close(); cerr != nil && !errors.Is(cerr, net.ErrClosed) && err == nil {
		err = cerr
	}
	return err
}

// peerKey is the context key of a connection's peer credentials.
type peerKey struct{}

// peer is who is on the other end of an admin socket connection.
type peer struct {
	uid int
	err error // the credentials could not be read
}

// peerOf reads c's peer credentials from the kernel.
func peerOf(c net.Conn) peer {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return peer{err: fmt.Errorf("admin socket: %T is not a Unix connection", c)}
	}
	uid, err := connid.PeerUID(uc)
	return peer{uid: uid, err: err}
}

// ServeHTTP admits root and the portal's own user with the identity
// cli:<user>, and refuses everyone else before the request reaches the API.
func (a *adminSocket) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p, ok := r.Context().Value(peerKey{}).(peer)
	if !ok || p.err != nil {
		a.log.Error("admin socket: peer credentials", "err", p.err)
		writeSocketError(w, http.StatusInternalServerError, "The portal could not tell who is calling.", "See the portal's log.")
		return
	}
	self := os.Getuid()
	if p.uid != 0 && p.uid != self {
		a.log.Warn("admin socket: refused a caller", "uid", p.uid)
		writeSocketError(w, http.StatusForbidden, fmt.Sprintf("User %s may not use the portal's admin socket.", userName(p.uid)),
			fmt.Sprintf("Run the command as root or as the portal's user (%s).", userName(self)))
		return
	}
	if !strings.HasPrefix(r.URL.Path, "/api/") {
		writeSocketError(w, http.StatusNotFound, "The admin socket serves the /api/ routes only.", "Open the portal's pages in a browser.")
		return
	}
	if a.portalURL != "" {
		w.Header().Set(api.PortalURLHeader, a.portalURL)
	}
	name := userName(p.uid)
	id := vdi.Identity{Login: auth.CLIPrefix + name, Name: name, Admin: true}
	a.api.ServeHTTP(w, r.WithContext(auth.WithTrustedIdentity(r.Context(), id)))
}

// userName returns uid's user name, or the number when it has none.
func userName(uid int) string {
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil && u.Username != "" {
		return u.Username
	}
	return strconv.Itoa(uid)
}

// writeSocketError answers in the API's error shape.
func writeSocketError(w http.ResponseWriter, code int, msg, hint string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(api.Error{Msg: msg, Hint: hint})
}
