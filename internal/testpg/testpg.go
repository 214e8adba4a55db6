// Package testpg runs a real PostgreSQL server for tests, from Debian's
// postgresql package: initdb in a temporary folder, a private port on
// loopback, password (SCRAM) authentication, no fsync. It runs as the
// unprivileged user postgres when the tests run as root (PostgreSQL
// refuses root). One server serves a test binary; each test gets a fresh
// database. Test code only.
package testpg

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver
)

// Superuser and Password sign in to every server this package starts.
const (
	Superuser = "corral"
	Password  = "corral-test-password"
)

// Server is a running PostgreSQL.
type Server struct {
	Port int
	dir  string
	cmd  *exec.Cmd
	log  string
	n    int
	mu   sync.Mutex

	// exited is closed once the postmaster has been reaped, with waitErr
	// (how it ended) set before.
	exited  chan struct{}
	waitErr error
}

var (
	sharedMu sync.Mutex
	shared   *Server
)

// Shared returns the test binary's server, starting it on first use and
// again if it has ended (saying how it ended, with its log); it skips the
// test when PostgreSQL is not installed. Call Stop from TestMain.
func Shared(tb testing.TB) *Server {
	tb.Helper()
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared != nil && !shared.running() {
		// Not this test's failure: say it where every run shows it.
		fmt.Fprintf(os.Stderr, "testpg: %s; starting a new server\n", shared.ended())
		shared.stop()
		shared = nil
	}
	if shared == nil {
		s, err := start()
		if errors.Is(err, errNotInstalled) {
			tb.Skip(err)
		}
		if err != nil {
			tb.Fatal(err)
		}
		shared = s
	}
	return shared
}

// Stop stops the shared server, if one was started.
func Stop() {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared != nil {
		shared.stop()
		shared = nil
	}
}

// running reports whether the postmaster is still there.
func (s *Server) running() bool {
	select {
	case <-s.exited:
		return false
	default:
		return true
	}
}

// ended says how the postmaster ended, with the end of its log (where
// PostgreSQL says which request or signal stopped it).
func (s *Server) ended() string {
	b, _ := os.ReadFile(s.log)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return fmt.Sprintf("PostgreSQL (pid %d, port %d) ended: %v; the end of its log:\n%s", s.cmd.Process.Pid, s.Port, s.waitErr, b)
}

var errNotInstalled = errors.New("testpg: PostgreSQL is not installed (apt-get install postgresql)")

// bin finds a PostgreSQL program in the newest installed version.
func bin(name string) (string, error) {
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/" + name)
	if len(found) == 0 {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
		return "", errNotInstalled
	}
	sort.Slice(found, func(i, j int) bool { return version(found[i]) > version(found[j]) })
	return found[0], nil
}

func version(path string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(path))))
	return n
}

// runAs is the user the server runs as: postgres under root, else us.
func runAs() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("testpg: running as root needs the postgres user (from the postgresql package): %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func start() (*Server, error) {
	initdb, err := bin("initdb")
	if err != nil {
		return nil, err
	}
	postgres, err := bin("postgres")
	if err != nil {
		return nil, err
	}
	cred, err := runAs()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "corral-pg")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, log: filepath.Join(dir, "server.log")}
	pw := filepath.Join(dir, "pw")
	if err := os.WriteFile(pw, []byte(Password+"\n"), 0o600); err != nil {
		return nil, err
	}
	if cred != nil {
		for _, p := range []string{dir, pw} {
			if err := os.Chown(p, int(cred.Uid), int(cred.Gid)); err != nil {
				return nil, err
			}
		}
	}
	data := filepath.Join(dir, "data")
	cmd := exec.Command(initdb, "-D", data, "-U", Superuser, "--pwfile", pw, "--auth=scram-sha-256", "-E", "UTF8", "--no-sync")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("testpg: initdb: %v: %s", err, out)
	}
	if s.Port, err = freePort(); err != nil {
		return nil, err
	}
	logf, err := os.Create(s.log)
	if err != nil {
		return nil, err
	}
	s.cmd = exec.Command(postgres, "-D", data, "-p", strconv.Itoa(s.Port), "-k", dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off",
		"-c", "full_page_writes=off", "-c", "shared_buffers=32MB", "-c", "max_connections=200")
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	s.cmd.Dir = dir
	// The server goes with the test binary, even when it is killed.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Setpgid: true, Pdeathsig: syscall.SIGQUIT}
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("testpg: start postgres: %w", err)
	}
	s.exited = make(chan struct{})
	go func() {
		s.waitErr = s.cmd.Wait()
		logf.Close()
		close(s.exited)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		db, err := sql.Open("pgx", s.URL("postgres"))
		if err == nil {
			err = db.Ping()
			db.Close()
		}
		if err == nil {
			return s, nil
		}
		if !s.running() {
			err := fmt.Errorf("testpg: %s", s.ended())
			s.stop()
			return nil, err
		}
		if time.Now().After(deadline) {
			s.stop()
			b, _ := os.ReadFile(s.log)
			return nil, fmt.Errorf("testpg: postgres did not answer within 30s: %v\n%s", err, b)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (s *Server) stop() {
	if s.exited != nil {
		s.cmd.Process.Signal(syscall.SIGINT) // fast shutdown
		select {
		case <-s.exited:
		case <-time.After(10 * time.Second):
			s.cmd.Process.Kill()
			<-s.exited
		}
	}
	os.RemoveAll(s.dir)
}

// URL is the postgres:// URL of database db as the superuser.
func (s *Server) URL(db string) string {
	return fmt.Sprintf("postgres://%s:%s@127.0.0.1:%d/%s?sslmode=disable", Superuser, Password, s.Port, db)
}

// NewDatabase creates a fresh, empty database and returns its URL.
func (s *Server) NewDatabase(tb testing.TB) string {
	tb.Helper()
	s.mu.Lock()
	s.n++
	name := fmt.Sprintf("t%d_%d", os.Getpid(), s.n)
	s.mu.Unlock()
	s.Exec(tb, "postgres", "CREATE DATABASE "+name)
	return s.URL(name)
}

// Exec runs statements in database db as the superuser.
func (s *Server) Exec(tb testing.TB, db, stmts string) {
	tb.Helper()
	c, err := sql.Open("pgx", s.URL(db))
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, st := range strings.Split(stmts, ";") {
		if strings.TrimSpace(st) == "" {
			continue
		}
		if _, err := c.ExecContext(ctx, st); err != nil {
			if !s.running() {
				tb.Fatalf("testpg: %s: %v\n%s", st, err, s.ended())
			}
			tb.Fatalf("testpg: %s: %v", st, err)
		}
	}
}

// Pause stops (SIGSTOP) or resumes (SIGCONT) the server, to test a
// database that stops answering.
func (s *Server) Pause(tb testing.TB, stop bool) {
	tb.Helper()
	sig := syscall.SIGCONT
	if stop {
		sig = syscall.SIGSTOP
	}
	// Every backend calls setsid, so the server is the postmaster and its
	// children, not a process group. The postmaster goes first: stopped, it
	// forks no backend that a scan of its children could miss.
	pm := s.cmd.Process.Pid
	if err := syscall.Kill(pm, sig); err != nil {
		tb.Fatal(err)
	}
	for i := 0; stop && i < 100 && procState(pm) != 'T'; i++ {
		time.Sleep(10 * time.Millisecond) // the stop lands when it is next scheduled
	}
	for _, pid := range children(pm) {
		if err := syscall.Kill(pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
			tb.Fatal(err)
		}
	}
}

// procState returns the state letter of pid (T when stopped), or 0.
func procState(pid int) byte {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	rest := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(rest) == 0 || rest[0] == "" {
		return 0
	}
	return rest[0][0]
}

// children returns the pids whose parent is pid.
func children(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so cut at the last ')'.
		rest := string(b[strings.LastIndexByte(string(b), ')')+1:])
		if f := strings.Fields(rest); len(f) > 1 && f[1] == strconv.Itoa(pid) {
			out = append(out, n)
		}
	}
	return out
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
