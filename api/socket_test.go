package api

import (
	"os"
	"path/filepath"
	"testing"
)

func TestDefaultDataDir_Root(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("root's default")
	}
	home := t.TempDir()
	t.Setenv("HOME", home)
	noXDG := func(string) string { return "" }
	if got := DefaultDataDir(noXDG); got != rootDataDir {
		t.Errorf("root's default data dir = %s; want %s (root's home is private)", got, rootDataDir)
	}
	old := filepath.Join(home, ".local", "share", "corral-vdi")
	os.MkdirAll(old, 0o700)
	if got := DefaultDataDir(noXDG); got != old {
		t.Errorf("root's default data dir with an older one in its home = %s; want %s (kept)", got, old)
	}
}
