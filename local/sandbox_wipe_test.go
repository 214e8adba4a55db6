package local

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/sys/unix"
)

// TestWipeTmpOf_SymlinkSwapRace wipes a uid's files from a shared /tmp
// while another desktop swaps the world-writable folder that holds them
// for a symlink to root's files, over and over (renameat2
// RENAME_EXCHANGE; fs.protected_symlinks does not stop it): root's files
// all survive, and the uid's files are gone once the swapping stops.
func TestWipeTmpOf_SymlinkSwapRace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the wipe runs as the desktop's uid")
	}
	const victimUID, files = 201950, 200
	shared, err := os.MkdirTemp("", "wipe-shared")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(shared)
	os.Chmod(shared, 0o777|os.ModeSticky)
	saved := tmpDirs
	tmpDirs = []string{shared}
	defer func() { tmpDirs = saved }()
	// Root's files, which the symlink points at: <root>/a/f*.
	root := t.TempDir()
	mustFiles(t, filepath.Join(root, "a"), files, -1)
	// Another desktop's world-writable folder w, holding the uid's folder a.
	w, alt := filepath.Join(shared, "w"), filepath.Join(shared, "alt")
	if err := os.Mkdir(w, 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(w, 0o777)
	os.Chown(w, victimUID+1, victimUID+1)
	if err := os.Symlink(root, alt); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		// Between rounds w is the real folder again, and holds the uid's
		// files.
		if fi, err := os.Lstat(w); err == nil && fi.Mode()&os.ModeSymlink != 0 {
			unix.Renameat2(unix.AT_FDCWD, w, unix.AT_FDCWD, alt, unix.RENAME_EXCHANGE)
		}
		mustFiles(t, filepath.Join(w, "a"), 20, victimUID)
		var stop atomic.Bool
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				unix.Renameat2(unix.AT_FDCWD, w, unix.AT_FDCWD, alt, unix.RENAME_EXCHANGE)
			}
		}()
		wipeTmpOf(victimUID)
		stop.Store(true)
		wg.Wait()
	}
	if fi, err := os.Lstat(w); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		unix.Renameat2(unix.AT_FDCWD, w, unix.AT_FDCWD, alt, unix.RENAME_EXCHANGE)
	}
	ents, _ := os.ReadDir(filepath.Join(root, "a"))
	if len(ents) != files {
		t.Errorf("the wipe deleted %d of root's %d files through the swapped symlink", files-len(ents), files)
	}
	if err := wipeTmpOf(victimUID); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(w); len(left) > 0 {
		t.Errorf("the uid's files survived the wipe: %s has %d entries", w, len(left))
	}
}

// mustFiles makes dir (if missing) and n files in it, owned by uid (-1:
// root's).
func mustFiles(tb testing.TB, dir string, n, uid int) {
	tb.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	if uid >= 0 {
		os.Lchown(dir, uid, uid)
	}
	for i := range n {
		f := filepath.Join(dir, fmt.Sprintf("f%d", i))
		if err := os.WriteFile(f, nil, 0o644); err != nil {
			tb.Fatal(err)
		}
		if uid >= 0 {
			os.Lchown(f, uid, uid)
		}
	}
}

// TestWriteFileIn_NeverWritesThrough plants what a desktop's uid can
// plant in its run folder where root is about to write: a symlink and a
// hard link to a file of root's. Root's file keeps its content and owner.
func TestWriteFileIn_NeverWritesThrough(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	u := &DesktopUser{UID: 201960, GID: 201960, own: true}
	dir := t.TempDir()
	run := filepath.Join(dir, "run")
	os.Mkdir(run, 0o700)
	u.give(run)
	target := filepath.Join(dir, "roots-file")
	os.WriteFile(target, []byte("root's"), 0o600)
	for _, plant := range []func(string, string) error{os.Symlink, os.Link} {
		os.Remove(filepath.Join(run, rdpSAMName))
		if err := plant(target, filepath.Join(run, rdpSAMName)); err != nil {
			t.Fatal(err)
		}
		if err := writeFileIn(run, rdpSAMName, []byte("sam"), u); err != nil {
			t.Fatal(err)
		}
		var st unix.Stat_t
		unix.Stat(target, &st)
		if b, _ := os.ReadFile(target); string(b) != "root's" || st.Uid != 0 {
			t.Errorf("root's file now holds %q, uid %d", b, st.Uid)
		}
		if b, _ := os.ReadFile(filepath.Join(run, rdpSAMName)); string(b) != "sam" {
			t.Errorf("the new file holds %q", b)
		}
	}
	// The run folder itself swapped for a symlink is refused.
	os.Rename(run, run+".old")
	os.Symlink(dir, run)
	if err := writeFileIn(run, "x", nil, u); err == nil {
		t.Error("wrote through a symlinked folder")
	}
}
