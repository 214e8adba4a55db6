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
// 0700 (0711 with sandboxed local desktops, whose uids must pass through
// to their own folders under local/, but may not list it), every file in
// it 0600 and every folder 0700. Files written later (SQLite's WAL and
// shared-memory files) take the database file's mode.
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
		path := filepath.Join(dir, e.Name())
		var want fs.FileMode
		switch t := e.Type(); {
		case t.IsDir() && e.Name() == localDirName && passable:
			continue
		case t.IsDir():
			want = 0o700
		case t.IsRegular(), t&fs.ModeSocket != 0:
			want = 0o600
		default: // symlinks and devices are not ours to change
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue // removed meanwhile
		}
		if fi.Mode().Perm()&^want != 0 {
			if err := os.Chmod(path, fi.Mode().Perm()&want); err != nil {
				return fmt.Errorf("data directory: %w", err)
			}
		}
	}
	return nil
}
