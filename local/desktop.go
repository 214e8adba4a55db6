package local

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ErrNotRunning is returned (wrapped) by AdoptDesktop when no live desktop
// was recorded in the member's folder.
var ErrNotRunning = errors.New("desktop not running")

const (
	desktopSocketName  = "vnc.sock"
	desktopAuthName    = "Xauthority"
	desktopPidsName    = "pids"
	desktopXvnc        = "Xvnc"
	desktopReadyWait   = 10 * time.Second
	desktopStopGrace   = 3 * time.Second
	desktopPollEvery   = time.Second
	desktopBackground  = "#2f3e4e"
	defaultGeometry    = "1280x800"
	maxUnixSocketPath  = 107 // sun_path is 108 bytes including the NUL
	defaultDesktopPath = "/usr/local/bin:/usr/bin:/bin"
)

// desktopDeps lists the programs a desktop runs and the Debian package that
// ships each, in start order.
var desktopDeps = []struct{ bin, pkg string }{
	{desktopXvnc, "tigervnc-standalone-server"},
	{"xsetroot", "x11-xserver-utils"},
	{"openbox", "openbox"},
	{"xterm", "xterm"},
}

var geometryRE = regexp.MustCompile(`^[1-9][0-9]{1,4}x[1-9][0-9]{1,4}$`)

// DesktopSpec says where and how one member's desktop runs.
type DesktopSpec struct {
	// Name is the member name, used in logs and as the VNC desktop name.
	Name string
	// Dir is the member's private folder (mode 0700), created if missing. It
	// holds vnc.sock, Xauthority, the pids file and one log per process. Keep
	// it short: the socket path must fit in 107 bytes.
	Dir string
	// Home is HOME and the working directory of the desktop's processes,
	// created if missing.
	Home string
	// Geometry is the screen size as WIDTHxHEIGHT; empty means 1280x800.
	Geometry string
	// State is the portal's own folder for the member: the pids file, the
	// logs and the RDP password. Empty means Dir. With a User it must not
	// be Dir, which then belongs to the desktop's uid.
	State string
	// User, when set, is who the desktop's processes run as: Dir and Home
	// are handed to that uid, and Stop kills every process of it. Nil runs
	// the desktop as the portal's own user (tests of this package only).
	User *DesktopUser
	// Network is NetworkOutbound or NetworkNone (empty); see
	// sandbox_net.go. Only a desktop with a User has one.
	Network string
	// Ephemeral says the member's home is wiped on release, so that it
	// may live on a size-capped tmpfs (sandbox_disk.go).
	Ephemeral bool
}

// withDefaults validates s and fills in defaults.
func (s DesktopSpec) withDefaults() (DesktopSpec, error) {
	if s.Dir == "" {
		return s, errors.New("desktop spec: Dir is required")
	}
	if s.Home == "" {
		return s, errors.New("desktop spec: Home is required")
	}
	if s.Name == "" {
		s.Name = filepath.Base(s.Dir)
	}
	if s.Geometry == "" {
		s.Geometry = defaultGeometry
	}
	if s.State == "" {
		s.State = s.Dir
	}
	if s.User != nil && filepath.Clean(s.State) == filepath.Clean(s.Dir) {
		return s, errors.New("desktop spec: a sandboxed desktop needs a State folder apart from Dir")
	}
	switch s.Network {
	case "", NetworkNone, NetworkOutbound:
	default:
		return s, fmt.Errorf("desktop spec: network %q is not none or outbound", s.Network)
	}
	if !geometryRE.MatchString(s.Geometry) {
		return s, fmt.Errorf("desktop spec: bad geometry %q, want WIDTHxHEIGHT", s.Geometry)
	}
	if n := len(filepath.Join(s.Dir, desktopSocketName)); n > maxUnixSocketPath {
		return s, fmt.Errorf("desktop spec: Dir %q too long for a Unix socket path (%d > %d bytes)", s.Dir, n, maxUnixSocketPath)
	}
	return s, nil
}

// Desktop is a running session desktop: Xvnc (an X display whose VNC server
// listens only on a Unix socket) with openbox and an xterm. Its processes
// survive the portal; a later portal takes them over with AdoptDesktop.
type Desktop struct {
	spec    DesktopSpec
	log     *slog.Logger
	display int
	procs   []*desktopProc // Xvnc first; recorded in the pids file
	helpers []*desktopProc // short-lived (xsetroot); not recorded
	keys    *keymap        // Xvnc's spare keys (desktop_keymap.go)

	done     chan struct{}
	doneOnce sync.Once
	poll     chan struct{} // closed by Stop to end the poll of an adopted Xvnc
	wg       sync.WaitGroup

	mu       sync.Mutex
	started  bool // procs is complete: a start returned, or an adoption
	stopping bool
	err      error
	terms    map[*TerminalConn]struct{} // open terminals

	stopOnce sync.Once
	stopErr  error

	// cgroupGen is the generation of the member's cgroup this desktop
	// runs in: its clean-ups remove only that one, never the folder a
	// later start of the member made again (desktopCgroup.removeAt).
	cgroupGen uint64
}

// CheckDesktopDeps reports, in one line, every program a desktop needs that
// is not on PATH, naming the Debian package to install.
func CheckDesktopDeps() error {
	_, err := lookDesktopDeps()
	return err
}

// lookDesktopDeps returns the full path of each program a desktop runs.
func lookDesktopDeps() (map[string]string, error) {
	paths := make(map[string]string, len(desktopDeps))
	var missing []string
	for _, d := range desktopDeps {
		p, err := exec.LookPath(d.bin)
		if err != nil {
			missing = append(missing, fmt.Sprintf("%s not found: install the Debian package %s", d.bin, d.pkg))
			continue
		}
		paths[d.bin] = p
	}
	if len(missing) > 0 {
		return nil, errors.New(strings.Join(missing, "; "))
	}
	return paths, nil
}

// StartDesktop starts a desktop for spec and returns once its VNC socket
// accepts connections. ctx bounds only the start (at most 10 s); the desktop
// runs until Stop, even after the portal exits. Processes a previous portal
// recorded in spec.Dir are killed first. On failure everything started is
// stopped and the error names the log file to read.
func StartDesktop(ctx context.Context, spec DesktopSpec, log *slog.Logger) (*Desktop, error) {
	begin := time.Now()
	spec, err := spec.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("local: start desktop: %w", err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("desktop", spec.Name)
	fail := func(err error) (*Desktop, error) {
		return nil, fmt.Errorf("local: start desktop %q: %w", spec.Name, err)
	}
	bins, err := lookDesktopDeps()
	if err != nil {
		return fail(err)
	}
	if err := killRecordedDesktop(spec.State, log); err != nil {
		return fail(err)
	}
	// The last stop (or a failed start) removed the cgroup.
	if err := spec.User.cgroup().make(); err != nil {
		return fail(err)
	}
	if err := prepareDesktopDirs(spec, log); err != nil {
		return fail(err)
	}
	authPath := filepath.Join(spec.Dir, desktopAuthName)
	if err := writeXauthority(spec.Dir, desktopAuthName, spec.User); err != nil {
		return fail(fmt.Errorf("write Xauthority: %w", err))
	}

	spec.User.chooseNetwork(spec.Network, log)
	d := &Desktop{spec: spec, log: log, display: -1, done: make(chan struct{}), cgroupGen: spec.User.cgroup().generation()}
	d.keys = newKeymap(d.xmodmapRunner(), true, log)
	// RDP's files are written before any process of the desktop runs.
	rdp, err := d.prepareRDP()
	if err != nil {
		log.Warn("desktop has no RDP", "err", err)
	}
	if err := d.start(ctx, bins, authPath, rdp); err != nil {
		d.mu.Lock()
		d.stopping = true
		d.mu.Unlock()
		if serr := d.Stop(); serr != nil {
			log.Warn("desktop cleanup after failed start", "err", serr)
		}
		return fail(err)
	}
	d.mu.Lock()
	d.started = true
	d.mu.Unlock()
	d.watchLimits()
	log.Info("desktop started", "display", d.display, "socket", d.VNCSocket(),
		"xvnc_pid", d.procs[0].PID, "elapsed", time.Since(begin).Round(time.Millisecond))
	return d, nil
}

// prepareDesktopDirs creates Dir (forced to 0700) and Home, and removes a
// stale socket so Xvnc can bind. A sandboxed desktop gets them as its uid's,
// once nothing of that uid runs any more.
func prepareDesktopDirs(spec DesktopSpec, log *slog.Logger) error {
	if err := os.MkdirAll(spec.State, 0o700); err != nil {
		return err
	}
	if spec.User != nil {
		return prepareSandboxDirs(spec, log)
	}
	if err := os.MkdirAll(spec.Dir, 0o700); err != nil {
		return err
	}
	if err := os.Chmod(spec.Dir, 0o700); err != nil {
		return err
	}
	if err := os.MkdirAll(spec.Home, 0o700); err != nil {
		return err
	}
	err := os.Remove(filepath.Join(spec.Dir, desktopSocketName))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// start runs Xvnc, waits for it, then paints the root window and starts
// openbox and xterm. The caller stops d if it fails.
func (d *Desktop) start(ctx context.Context, bins map[string]string, authPath, rdp string) error {
	begin := time.Now()
	if u := d.spec.User; u != nil && u.net != nil {
		if err := d.startNetwork(ctx); err != nil {
			return fmt.Errorf("network: %w", err)
		}
		d.log.Debug("desktop network ready", "elapsed", time.Since(begin).Round(time.Millisecond))
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	args := []string{
		"-displayfd", "3", // ExtraFiles[0]
		"-auth", authPath,
		"-desktop", d.spec.Name,
		"-geometry", d.spec.Geometry,
		"-depth", "24",
		"-rfbunixpath", d.VNCSocket(),
		"-rfbunixmode", "0600",
		"-rfbport", "-1", // no VNC over TCP
		"-nolisten", "tcp", // no X over TCP
		"-SecurityTypes", "None", // the socket is reachable only by our user
		// A client asking for a session of its own (a native viewer run
		// inside the desktop) must not drop the others, the hub among them.
		"-AlwaysShared",
		// No key repeat of the X server's own: the console repeats a
		// held key itself (the browser does), and the server's repeat
		// turned a key-up that came late (a slow link, a busy machine)
		// into extra letters, "zzzz" for "z".
		"-r",
	}
	env := []string{"PATH=" + desktopPath(), "HOME=" + d.spec.Home, "LANG=C.UTF-8"}
	xvnc, err := startDesktopProc(desktopXvnc, d.spec.State, bins[desktopXvnc], args, env, d.spec.Home, []*os.File{w}, d.spec.User)
	w.Close() // Xvnc holds the only write end now: EOF means it died
	if err != nil {
		return err
	}
	d.procs = append([]*desktopProc{xvnc}, d.procs...) // Xvnc first, as ever
	d.wg.Add(1)
	go d.watchXvnc(xvnc)
	if err := d.writePids(); err != nil {
		return err
	}

	xlog := filepath.Join(d.spec.State, desktopXvnc+".log")
	display, err := readDisplay(ctx, r)
	if err != nil {
		if line := lastLogLine(xlog); line != "" {
			err = fmt.Errorf("%w: %s", err, line)
		}
		return fmt.Errorf("Xvnc not ready: %w (see %s)", err, xlog)
	}
	d.display = display
	if err := waitSocket(ctx, d.VNCSocket()); err != nil {
		return fmt.Errorf("Xvnc not ready: %w (see %s)", err, xlog)
	}
	if err := d.writePids(); err != nil {
		return err
	}
	d.log.Debug("desktop Xvnc ready", "display", display, "elapsed", time.Since(begin).Round(time.Millisecond))

	env = d.Env()
	d.paintRoot(bins["xsetroot"], env)
	// openbox starts the terminal itself once it manages the screen: a
	// window mapped while the window manager is still starting can be lost
	// (left unmapped), and Xt would otherwise wait 5 s for the manager.
	// The terminal is openbox's child, in its process group.
	// A scalable font (fonts-dejavu-core) that reads well, not xterm's
	// tiny bitmap one.
	terminal := fmt.Sprintf("%s -fa %s -fs 11 -geometry 100x30+40+40 -title %s", shellQuote(bins["xterm"]), shellQuote("DejaVu Sans Mono"), shellQuote(d.spec.Name))
	// The session makes ~/Downloads, as a desktop's user-dirs would: the
	// Files panel serves it, and a fresh home would have none to save
	// into. It runs as the desktop's own uid, inside its sandbox.
	startup := "/bin/sh -c " + shellQuote(`mkdir -p "$HOME/`+downloadsDir+`"; exec `+terminal)
	p, err := startDesktopProc("openbox", d.spec.State, bins["openbox"], []string{"--startup", startup}, env, d.spec.Home, nil, d.spec.User)
	if err != nil {
		return err
	}
	d.procs = append(d.procs, p)
	if err := d.writePids(); err != nil {
		return err
	}
	// RDP is a second way in, not a requirement: without it the desktop
	// still offers VNC. Sound, likewise, is a comfort. Both start at once.
	servers := []*server{d.soundServer()}
	if rdp != "" {
		servers = append([]*server{d.rdpServer(rdp)}, servers...)
	}
	d.startServers(ctx, servers)
	d.log.Debug("desktop RDP and sound ready", "elapsed", time.Since(begin).Round(time.Millisecond))
	return nil
}

// readDisplay reads the display number Xvnc writes to -displayfd once it
// accepts connections.
func readDisplay(ctx context.Context, r *os.File) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, desktopReadyWait)
	defer cancel()
	type result struct {
		line string
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		line, err := bufio.NewReader(r).ReadString('\n')
		ch <- result{line, err}
	}()
	select {
	case res := <-ch:
		if res.err != nil {
			return 0, errors.New("Xvnc exited before reporting its display")
		}
		n, err := strconv.Atoi(strings.TrimSpace(res.line))
		if err != nil || n < 0 {
			return 0, fmt.Errorf("Xvnc reported display %q", strings.TrimSpace(res.line))
		}
		return n, nil
	case <-ctx.Done():
		r.Close() // ends the reader
		return 0, fmt.Errorf("waiting for the display: %w", ctx.Err())
	}
}

// waitSocket waits until a server listens on the Unix socket path. Xvnc
// creates its socket before it reports its display, so this normally
// returns at once; the file alone is not enough (it appears at bind, and
// freerdp-shadow refuses connections until it listens a moment later, which
// a console probe right after the start would take for "no RDP").
func waitSocket(ctx context.Context, path string) error {
	ctx, cancel := context.WithTimeout(ctx, desktopReadyWait)
	defer cancel()
	for {
		if fi, err := os.Stat(path); err == nil && fi.Mode().Type() == fs.ModeSocket {
			if c, err := net.Dial("unix", path); err == nil {
				c.Close()
				return nil
			}
		}
		select {
		case <-ctx.Done():
			if _, err := os.Stat(path); err == nil {
				return fmt.Errorf("nothing listens on %s: %w", path, ctx.Err())
			}
			return fmt.Errorf("no socket %s: %w", path, ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// paintRoot gives the root window a colour so an empty desktop does not look
// like a broken (black) one. It runs alongside the clients rather than
// delaying the start; a failure is cosmetic and left in xsetroot.log.
func (d *Desktop) paintRoot(xsetroot string, env []string) {
	p, err := startDesktopProc("xsetroot", d.spec.State, xsetroot, []string{"-solid", desktopBackground}, env, d.spec.Home, nil, d.spec.User)
	if err != nil {
		d.log.Warn("desktop xsetroot failed", "err", err)
		return
	}
	d.helpers = append(d.helpers, p)
}

// desktopPath returns the PATH for the desktop's processes.
func desktopPath() string {
	if p := os.Getenv("PATH"); p != "" {
		return p
	}
	return defaultDesktopPath
}

// currentUser returns the user name for USER and LOGNAME.
func currentUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return strconv.Itoa(os.Getuid())
}

// shellQuote quotes s for openbox's --startup, which splits a command line
// like a shell does.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
