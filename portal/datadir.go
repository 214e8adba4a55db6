package portal

import (
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
)

// localDirName is the local backend's folder in the data directory; it
// sets the modes below it itself.
const localDirName = "local"

// tightenDataDir makes the data directory 0700 and the portal's own files
// in it (database, keys, secrets) 0600, whatever umask made them: they are
// the portal's authority and must not rely on a folder's mode alone.
// Local desktops' folders below it are the local backend's to set. With
// passable (sandboxed local desktops) the folder is 0711 instead: each
// desktop's uid must pass through it to its own folder under local/, but
// may not list it, and every file in it is 0600 anyway.
func tightenDataDir(dir string, passable bool, log *slog.Logger) error {
	mode := fs.FileMode(0o700)
	if passable {
		mode = 0o711
	}
	if err := os.Chmod(dir, mode); err != nil {
		return fmt.Errorf("data directory %s: %w", dir, err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("data directory %s: %w", dir, err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		info, err := e.Info()
		if err != nil || info.Mode().Perm()&0o077 == 0 {
			continue
		}
		path := filepath.Join(dir, e.Name())
		if err := os.Chmod(path, info.Mode().Perm()&0o700); err != nil {
			return fmt.Errorf("data directory: %w", err)
		}
		log.Info("tightened file mode", "file", path, "was", info.Mode().Perm().String())
	}
	return nil
}

// ensurePrivate creates path with mode 0600 if it does not exist, so that
// SQLite (which gives its -wal and -shm files the main file's mode) never
// makes the database readable by others, not even for a moment.
func ensurePrivate(path string) error {
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	return f.Close()
}
