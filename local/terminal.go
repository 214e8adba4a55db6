package local

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/corral-dev/corral-vdi-portal/internal/procgroup"
	"github.com/creack/pty"
)

// A session desktop's terminal: each connection gets its own login shell on
// a fresh pty, in the desktop's home and on its display (so that programs
// started from it open their windows on the desktop). The shell ends when
// the connection closes.

// TerminalConn is a shell on a pty, as a desktop stream. It takes resizes
// (Resize(cols, rows)): a resize message from the browser reaches the pty.
type TerminalConn struct {
	pty   *os.File
	shell *procgroup.Leader // leads its session
	done  chan struct{}     // closed once the shell is reaped

	closeOnce sync.Once
	closed    func() // tells the desktop the terminal is gone

	size sizeKeeper // the size the browser last asked for
}

var _ net.Conn = (*TerminalConn)(nil)

// terminalShell returns the shell to run: bash when installed, else sh.
func terminalShell() string {
	if p, err := exec.LookPath("bash"); err == nil {
		return p
	}
	return "/bin/sh"
}

// StartTerminal starts a login shell for d on a new 80x24 pty, as the
// desktop's uid and within its limits when it is sandboxed. Stop hangs up
// every terminal still open.
func (d *Desktop) StartTerminal() (*TerminalConn, error) {
	d.mu.Lock()
	stopping := d.stopping
	d.mu.Unlock()
	if stopping {
		return nil, fmt.Errorf("local: terminal of %s: the desktop is stopping", d.spec.Name)
	}
	shell := terminalShell()
	cmd := d.spec.User.terminalCommand(shell, "-l")
	cmd.Dir = d.spec.Home
	env := append(d.Env(), "TERM=xterm-256color", "COLORTERM=truecolor")
	for i, kv := range env {
		if len(kv) > 6 && kv[:6] == "SHELL=" {
			env[i] = "SHELL=" + shell
		}
	}
	d.spec.User.setEnv(cmd, env)
	attrs := d.spec.User.sysProcAttr(&syscall.SysProcAttr{Setsid: true, Setctty: true})
	ptmx, err := pty.StartWithAttrs(cmd, &pty.Winsize{Cols: 80, Rows: 24}, attrs)
	closeCgroupFD(attrs)
	if err != nil {
		return nil, fmt.Errorf("local: terminal of %s: %w", d.spec.Name, err)
	}
	f, err := pollable(ptmx)
	if err != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
		return nil, fmt.Errorf("local: terminal of %s: %w", d.spec.Name, err)
	}
	t := &TerminalConn{pty: f, shell: procgroup.Lead(cmd), done: make(chan struct{})}
	d.mu.Lock()
	if d.terms == nil {
		d.terms = map[*TerminalConn]struct{}{}
	}
	d.terms[t] = struct{}{}
	d.mu.Unlock()
	t.closed = func() {
		d.mu.Lock()
		delete(d.terms, t)
		d.mu.Unlock()
	}
	go func() {
		t.shell.Wait()
		close(t.done)
	}()
	return t, nil
}

// pollable returns a copy of the pty master f in non-blocking mode, which
// Go's poller serves: deadlines work and Close ends a pending Read. pty
// leaves f blocking (it asks f for its Fd), where neither holds. f is closed.
func pollable(f *os.File) (*os.File, error) {
	defer f.Close()
	fd, err := syscall.Dup(int(f.Fd()))
	if err != nil {
		return nil, err
	}
	if err := syscall.SetNonblock(fd, true); err != nil {
		syscall.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), f.Name()), nil
}

// Read reads the shell's output. The pty's EIO once the shell has gone is
// the end of the stream.
func (t *TerminalConn) Read(p []byte) (int, error) {
	n, err := t.pty.Read(p)
	if n > 0 {
		t.size.keep(t.pty)
	}
	if err != nil && errors.Is(err, syscall.EIO) {
		err = io.EOF
	}
	return n, err
}

// Write types p into the shell.
func (t *TerminalConn) Write(p []byte) (int, error) { return t.pty.Write(p) }

// Resize sets the pty's size; the shell gets SIGWINCH.
func (t *TerminalConn) Resize(cols, rows uint16) error {
	return t.size.set(t.pty, cols, rows)
}

// Size returns the pty's size in character cells.
func (t *TerminalConn) Size() (cols, rows uint16, err error) {
	r, c, err := pty.Getsize(t.pty)
	return uint16(c), uint16(r), err
}

// Close hangs up the shell (SIGHUP to its session, SIGKILL if it lingers)
// and waits for it. A shell that has been reaped is not signalled (procgroup.Leader).
func (t *TerminalConn) Close() error {
	t.closeOnce.Do(func() {
		t.shell.Signal(syscall.SIGHUP)
		t.pty.Close()
		select {
		case <-t.done:
		case <-time.After(2 * time.Second):
			t.shell.Signal(syscall.SIGKILL)
			<-t.done
		}
		t.closed()
	})
	return nil
}

// LocalAddr implements net.Conn.
func (t *TerminalConn) LocalAddr() net.Addr { return ptyAddr{} }

// RemoteAddr implements net.Conn.
func (t *TerminalConn) RemoteAddr() net.Addr { return ptyAddr{} }

// SetDeadline implements net.Conn.
func (t *TerminalConn) SetDeadline(d time.Time) error { return t.pty.SetDeadline(d) }

// SetReadDeadline implements net.Conn.
func (t *TerminalConn) SetReadDeadline(d time.Time) error { return t.pty.SetReadDeadline(d) }

// SetWriteDeadline implements net.Conn.
func (t *TerminalConn) SetWriteDeadline(d time.Time) error { return t.pty.SetWriteDeadline(d) }

type ptyAddr struct{}

func (ptyAddr) Network() string { return "pty" }
func (ptyAddr) String() string  { return "pty" }
