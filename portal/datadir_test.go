package portal

import (
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
)

// TestTightenDataDir_LocalDesktops: with sandboxed local desktops the
// folder is 0711 (passable, not listable), files are still private, and
// local/ is left to the backend.
func TestTightenDataDir_LocalDesktops(t *testing.T) {
	for _, tc := range []struct {
		passable bool
		dir      fs.FileMode
	}{{false, 0o700}, {true, 0o711}} {
		dir := t.TempDir()
		os.Chmod(dir, 0o755)
		os.WriteFile(filepath.Join(dir, "portal.db"), nil, 0o644)
		os.WriteFile(filepath.Join(dir, "cookie.keys"), nil, 0o640)
		os.Mkdir(filepath.Join(dir, localDirName), 0o755)
		if err := tightenDataDir(dir, tc.passable, slog.New(slog.DiscardHandler)); err != nil {
			t.Fatal(err)
		}
		for path, want := range map[string]fs.FileMode{
			dir:                               tc.dir,
			filepath.Join(dir, "portal.db"):   0o600,
			filepath.Join(dir, "cookie.keys"): 0o600,
			filepath.Join(dir, localDirName):  0o755,
		} {
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if got := fi.Mode().Perm(); got != want {
				t.Errorf("passable %v: %s mode %04o; want %04o", tc.passable, filepath.Base(path), got, want)
			}
		}
	}
}
