package local

import (
	"context"
	"fmt"
	"path/filepath"
)

// startServer starts one of the desktop's optional servers (RDP, sound)
// as a recorded process and waits for its socket; if the socket never
// answers it stops the server again and says why from its log.
func (d *Desktop) startServer(ctx context.Context, name, bin string, args, env []string, cwd, sock string) error {
	p, err := startDesktopProc(name, d.spec.State, bin, args, env, cwd, nil, d.spec.User)
	if err != nil {
		return err
	}
	d.procs = append(d.procs, p)
	if err := d.writePids(); err != nil {
		return err
	}
	if err := waitSocket(ctx, sock); err != nil {
		_ = stopDesktopProcs([]*desktopProc{p}, desktopStopGrace)
		d.procs = d.procs[:len(d.procs)-1]
		_ = d.writePids()
		log := filepath.Join(d.spec.State, name+".log")
		if line := lastLogLine(log); line != "" {
			err = fmt.Errorf("%w: %s", err, line)
		}
		return fmt.Errorf("%s not ready: %w (see %s)", name, err, log)
	}
	return nil
}
