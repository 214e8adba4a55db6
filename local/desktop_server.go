package local

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
)

// server is one of the desktop's optional servers (RDP, sound): a
// recorded process that is ready once its socket is there.
type server struct {
	name, bin string
	args, env []string
	cwd, sock string
	what      string // "RDP", "sound": for the warning that it is missing
	proc      *desktopProc
	err       error
}

// startServers starts the desktop's optional servers together and waits
// for their sockets in parallel, so that the desktop is ready when the
// slowest is, not after the sum of them. A server whose socket never
// answers is stopped again, and the log says why from its own log: the
// desktop works without it.
func (d *Desktop) startServers(ctx context.Context, servers []*server) {
	for _, s := range servers {
		if s.err != nil {
			continue
		}
		s.proc, s.err = startDesktopProc(s.name, d.spec.State, s.bin, s.args, s.env, s.cwd, nil, d.spec.User)
		if s.err == nil {
			d.procs = append(d.procs, s.proc)
		}
	}
	if err := d.writePids(); err != nil {
		d.log.Warn("desktop pids file", "err", err)
	}
	var wg sync.WaitGroup
	for _, s := range servers {
		if s.err != nil {
			continue
		}
		wg.Go(func() { s.err = waitSocket(ctx, s.sock) })
	}
	wg.Wait()
	stopped := false
	for _, s := range servers {
		if s.err == nil {
			continue
		}
		if s.proc != nil {
			_ = stopDesktopProcs([]*desktopProc{s.proc}, desktopStopGrace)
			d.procs = slices.DeleteFunc(d.procs, func(p *desktopProc) bool { return p == s.proc })
			stopped = true
			log := filepath.Join(d.spec.State, s.name+".log")
			if line := lastLogLine(log); line != "" {
				s.err = fmt.Errorf("%w: %s", s.err, line)
			}
			s.err = fmt.Errorf("%s not ready: %w (see %s)", s.name, s.err, log)
		}
		d.log.Warn("desktop has no "+s.what, "err", s.err)
	}
	if stopped {
		_ = d.writePids()
	}
}
