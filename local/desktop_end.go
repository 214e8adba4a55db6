package local

// A desktop's end: Xvnc is reaped (or, for an adopted desktop, polled),
// the rest of its processes go with it, and Stop kills what is left by
// PID, checked first against reuse.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// watchXvnc reaps Xvnc and ends the desktop.
func (d *Desktop) watchXvnc(xvnc *desktopProc) {
	defer d.wg.Done()
	<-xvnc.exited
	status := "exit status 0"
	if xvnc.waitErr != nil {
		status = xvnc.waitErr.Error()
	}
	d.xvncEnded("Xvnc exited: " + status)
}

// xvncEnded ends the desktop whose Xvnc is gone: unless Stop ended it, its
// error is why (with Xvnc's last log line) and the rest of its processes
// are killed.
func (d *Desktop) xvncEnded(why string) {
	d.mu.Lock()
	if !d.stopping && d.err == nil {
		d.err = fmt.Errorf("%s: %s", why, lastLogLine(filepath.Join(d.spec.State, desktopXvnc+".log")))
		d.log.Warn("desktop ended", "err", d.err)
	}
	rest := !d.stopping && d.started
	d.mu.Unlock()
	if rest {
		d.killRest()
	}
	d.closeDone()
}

// killRest kills the desktop's own processes that outlive its Xvnc (its
// network's, the RDP server): by PID, each checked to be the process
// started, never by uid, which a new start of the member may use by now.
func (d *Desktop) killRest() {
	for _, p := range d.procs[1:] {
		p.signal(syscall.SIGKILL)
	}
	d.wg.Add(1)
	go func() { // its cgroup goes once they are gone, unless a later start made it anew
		defer d.wg.Done()
		for _, p := range d.procs[1:] {
			p.wait(desktopStopGrace)
		}
		d.spec.User.cgroup().removeAt(d.cgroupGen)
	}()
}

// pollXvnc watches an adopted Xvnc, which is not our child, until it is gone
// or Stop is called.
func (d *Desktop) pollXvnc(xvnc *desktopProc) {
	defer d.wg.Done()
	t := time.NewTicker(desktopPollEvery)
	defer t.Stop()
	for {
		select {
		case <-d.poll:
			return
		case <-t.C:
		}
		if xvnc.alive() {
			continue
		}
		d.xvncEnded(fmt.Sprintf("Xvnc (pid %d) exited", xvnc.PID))
		return
	}
}

func (d *Desktop) closeDone() { d.doneOnce.Do(func() { close(d.done) }) }

func (d *Desktop) writePids() error {
	if err := writeDesktopPids(d.spec.State, desktopPids{Display: d.display, Procs: d.procs}); err != nil {
		return fmt.Errorf("write pids: %w", err)
	}
	return nil
}

// VNCSocket returns the path of the Unix socket the VNC server listens on.
func (d *Desktop) VNCSocket() string { return filepath.Join(d.spec.Dir, desktopSocketName) }

// Display returns the X display number, as in DISPLAY=:N.
func (d *Desktop) Display() int { return d.display }

// XAuthority returns the path of the Xauthority file X clients need to use
// the display.
func (d *Desktop) XAuthority() string { return filepath.Join(d.spec.Dir, desktopAuthName) }

// Env returns the environment the desktop's own clients run with (PATH,
// HOME, USER, LOGNAME, SHELL, LANG, DISPLAY and XAUTHORITY), for starting
// more programs on the display, such as an RDP shadow server.
func (d *Desktop) Env() []string {
	u := currentUser()
	if d.spec.User != nil {
		u = d.spec.Name // the uid has no account; the member's name reads well
	}
	return []string{
		"PATH=" + desktopPath(),
		"HOME=" + d.spec.Home,
		"USER=" + u,
		"LOGNAME=" + u,
		"SHELL=/bin/bash",
		"LANG=C.UTF-8",
		"DISPLAY=:" + strconv.Itoa(d.display),
		"XAUTHORITY=" + d.XAuthority(),
		"PULSE_SERVER=unix:" + d.audioSocket(),
	}
}

// Done returns a channel closed when Xvnc has exited, on its own or by Stop.
func (d *Desktop) Done() <-chan struct{} { return d.done }

// Err returns why the desktop ended once Done is closed: for example
// "Xvnc exited: exit status 1: <last line of its log>". It is nil while the
// desktop runs and when it ended because of Stop.
func (d *Desktop) Err() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.err
}

// Stop kills the desktop's own processes, by PID and only after checking
// each is still the process that was started, and for a sandboxed desktop
// every other process of its uid; waits for them, and removes
// the socket, the pids file and the Xauthority file. Logs are kept. Call it
// also after Done to clean up what is left; later calls return the first
// result.
func (d *Desktop) Stop() error {
	d.stopOnce.Do(func() {
		d.mu.Lock()
		d.stopping = true
		d.mu.Unlock()
		if d.poll != nil {
			close(d.poll)
		}
		d.closeTerminals()
		// Clients first, so they do not log X I/O errors on the way out.
		procs := append([]*desktopProc(nil), d.helpers...)
		for i := len(d.procs) - 1; i >= 0; i-- {
			procs = append(procs, d.procs[i])
		}
		errs := []error{stopDesktopProcs(procs, desktopStopGrace)}
		if len(d.procs) == 0 || !d.procs[0].alive() {
			d.wg.Wait()
		}
		d.closeDone()
		// The user's own leftovers: setsid, nohup, daemons.
		errs = append(errs, d.spec.User.killLeftovers(desktopStopGrace))
		d.spec.User.cgroup().removeAt(d.cgroupGen)
		for _, path := range []string{
			filepath.Join(d.spec.Dir, desktopSocketName), filepath.Join(d.spec.State, desktopPidsName),
			filepath.Join(d.spec.Dir, desktopAuthName), filepath.Join(d.spec.Dir, rdpSocketName),
			filepath.Join(d.spec.Dir, rdpSAMName), filepath.Join(d.spec.State, rdpPasswordName),
		} {
			if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
		if err := errors.Join(errs...); err != nil {
			d.stopErr = fmt.Errorf("local: stop desktop %q: %w", d.spec.Name, err)
		}
		d.log.Info("desktop stopped", "err", d.stopErr)
	})
	return d.stopErr
}

// closeTerminals hangs up every open terminal of d.
func (d *Desktop) closeTerminals() {
	d.mu.Lock()
	terms := make([]*TerminalConn, 0, len(d.terms))
	for t := range d.terms {
		terms = append(terms, t)
	}
	d.mu.Unlock()
	for _, t := range terms {
		t.Close()
	}
}
