package portal

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// --stop-desktops-on-exit stops the local desktops when the portal exits,
// which a SIGKILL (the OOM killer, a node failure) does not let it do. A
// run told to stop them leaves a mark in the data dir until it has; the
// next start that finds the mark says that its desktops outlived it, and
// stops them when it is told to stop its own (else they are adopted, as
// desktops of a run not told to stop them are).

// stopOnExitMark is the mark's name under the local backend's folder.
const stopOnExitMark = "stop-desktops-on-exit.pending"

func (m *Main) stopOnExitMark() string {
	return filepath.Join(m.Config.Server.DataDir, localDirName, stopOnExitMark)
}

// stopLeftDesktops handles a previous run's mark, then leaves this run's.
func (m *Main) stopLeftDesktops(ctx context.Context) error {
	_, err := os.Lstat(m.stopOnExitMark())
	left := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	switch {
	case left && m.Config.Local.StopDesktopsOnExit:
		n := m.backend.StopAll(ctx)
		m.Log.Warn("the previous run ended without stopping its desktops (killed?); stopped them now, as --stop-desktops-on-exit asks", "desktops", n)
	case left:
		m.Log.Warn("the previous run ended without stopping its desktops (killed?), as --stop-desktops-on-exit asked it to; they keep running, adopted by this run")
	}
	if !m.Config.Local.StopDesktopsOnExit {
		return removeMark(m.stopOnExitMark())
	}
	return os.WriteFile(m.stopOnExitMark(), nil, 0o600)
}

// stoppedOnExit takes the mark away once the desktops are stopped.
func (m *Main) stoppedOnExit() {
	if err := removeMark(m.stopOnExitMark()); err != nil {
		m.Log.Error("remove the stop-on-exit mark", "err", err)
	}
}

func removeMark(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
