package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// AdoptDesktop takes over the desktop a previous portal started for spec,
// as recorded in spec.Dir. It adopts it when the recorded Xvnc is alive (same
// PID and start time) and its socket answers; Done then fires when a poll,
// once a second, sees Xvnc gone. Otherwise it kills whatever recorded
// processes survive and returns an error wrapping ErrNotRunning.
func AdoptDesktop(spec DesktopSpec, log *slog.Logger) (*Desktop, error) {
	spec, err := spec.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("local: adopt desktop: %w", err)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("desktop", spec.Name)
	notRunning := func(why string) (*Desktop, error) {
		spec.User.removeCgroup() // made for a desktop that is not there
		return nil, fmt.Errorf("local: adopt desktop %q: %s: %w", spec.Name, why, ErrNotRunning)
	}

	rec, err := readDesktopPids(spec.State)
	if errors.Is(err, fs.ErrNotExist) {
		if spec.User != nil {
			killLegacyDesktop(spec, log)
		}
		return notRunning("no pids file")
	}
	if err != nil {
		// Nothing trustworthy to kill; drop the file so the next start is clean.
		_ = os.Remove(filepath.Join(spec.State, desktopPidsName))
		return notRunning(err.Error())
	}
	var xvnc *desktopProc
	var live []*desktopProc
	for _, p := range rec.Procs {
		if !p.alive() {
			continue
		}
		if p.Name == desktopXvnc && xvnc == nil {
			xvnc = p
		}
		live = append(live, p)
	}
	sock := filepath.Join(spec.Dir, desktopSocketName)
	why := "Xvnc is gone"
	spec.User.chooseNetwork(spec.Network, log)
	if xvnc != nil && spec.User != nil && spec.User.net != nil && !adoptNetwork(spec.User.net, live, spec.State) {
		xvnc, why = nil, "its network namespace is gone"
	}
	if xvnc != nil {
		why = "Xvnc does not answer"
		probe := &Desktop{spec: spec}
		if rec.Display >= 0 && vncAnswers(probe, sock) {
			// Keep Xvnc first, as StartDesktop does.
			procs := []*desktopProc{xvnc}
			for _, p := range live {
				if p != xvnc {
					procs = append(procs, p)
				}
			}
			d := &Desktop{
				spec:    spec,
				log:     log,
				display: rec.Display,
				procs:   procs,
				done:    make(chan struct{}),
				poll:    make(chan struct{}),
				started: true,

				cgroupGen: spec.User.cgroup().generation(),
			}
			d.keys = newKeymap(d.xmodmapRunner(), false, log)
			if err := d.restartPasta(); err != nil {
				log.Warn("desktop adopted without outbound network", "err", err)
			}
			d.wg.Add(1)
			go d.pollXvnc(xvnc)
			d.watchLimits()
			log.Info("desktop adopted", "display", d.display, "xvnc_pid", xvnc.PID, "procs", len(procs))
			return d, nil
		}
	}
	errs := []error{killRecorded(spec.State, live, log), spec.User.killLeftovers(desktopStopGrace)}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("local: adopt desktop %q: %w", spec.Name, err)
	}
	return notRunning(why)
}

// killRecordedDesktop kills any live processes recorded in dir's pids file.
func killRecordedDesktop(dir string, log *slog.Logger) error {
	rec, err := readDesktopPids(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		log.Warn("desktop ignoring unreadable pids file", "err", err)
		return nil
	}
	var live []*desktopProc
	for _, p := range rec.Procs {
		if p.alive() {
			live = append(live, p)
		}
	}
	return killRecorded(dir, live, log)
}

// killRecorded stops leftovers of a desktop and removes its socket and pids
// file.
func killRecorded(dir string, live []*desktopProc, log *slog.Logger) error {
	if len(live) > 0 {
		names := make([]string, len(live))
		for i, p := range live {
			names[i] = fmt.Sprintf("%s:%d", p.Name, p.PID)
		}
		log.Warn("desktop killing leftovers", "procs", strings.Join(names, ","))
	}
	errs := []error{stopDesktopProcs(live, desktopStopGrace)}
	for _, name := range []string{desktopSocketName, desktopPidsName} {
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// vncAnswers reports whether an RFB server greets on the Unix socket.
func vncAnswers(d *Desktop, sock string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c, err := d.dialSocket(ctx, sock)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	banner := make([]byte, 12)
	if _, err := io.ReadFull(c, banner); err != nil {
		return false
	}
	return strings.HasPrefix(string(banner), "RFB ")
}
