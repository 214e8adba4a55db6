package portal

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// localDirName is the local backend's folder in the data directory; it
// sets the modes below it itself.
const localDirName = "local"

// tightenDataDir makes the data directory the portal's alone: the folder
// 0700 (0711 with local desktops, whose uids must pass through to their
// own folders under local/ but may not list it), and the portal's own
// files in it (the database and its journals, key files, sockets,
// secrets) lose every group and other bit. Other entries are left alone,
// in case CORRAL_VDI_DATA_DIR names a folder that holds more. Files the
// portal writes later are 0600 already; SQLite's WAL and shared-memory
// files take the database file's mode.
func tightenDataDir(dir string, passable bool) error {
	mode := fs.FileMode(0o700)
	if passable {
		mode = 0o711
	}
	if err := os.Chmod(dir, mode); err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("data directory: %w", err)
	}
	for _, e := range ents {
		if !portalFile(e.Name()) || !(e.Type().IsRegular() || e.Type()&fs.ModeSocket != 0) {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue // removed meanwhile
		}
		if perm := fi.Mode().Perm(); perm&0o077 != 0 {
			if err := os.Chmod(filepath.Join(dir, e.Name()), perm&^0o077); err != nil {
				return fmt.Errorf("data directory: %w", err)
			}
		}
	}
	return nil
}

// portalFile reports whether name is one of the portal's files in its data
// directory.
func portalFile(name string) bool {
	for _, pattern := range []string{"portal.db*", "*.keys", "*.key", "*.sock", "*secret*", "*.json"} {
		if ok, _ := filepath.Match(pattern, name); ok {
			return true
		}
	}
	return false
}
