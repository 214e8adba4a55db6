package local

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Ending a sandboxed desktop for good kills by uid, not by remembered PID:
// whatever the user started (setsid, nohup, double forks) runs as the
// member's uid and nothing else does, and a PID read from /proc is pinned
// with a pidfd before it is signalled, so a recycled PID is never hit.

// tmpDirs are the shared temporary folders a desktop may leave files in.
var tmpDirs = []string{"/tmp", "/var/tmp", "/dev/shm"}

// killUID SIGKILLs every process whose real, effective, saved or
// filesystem uid is uid, until none is left or timeout passes.
func killUID(uid int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		left := 0
		for _, pid := range uidProcs(uid) {
			if killPinned(pid, uid) {
				left++
			}
		}
		if left == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d processes of uid %d survived SIGKILL", left, uid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// uidProcs returns the PIDs of the live (not zombie) processes of uid.
func uidProcs(uid int) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if procOfUID(pid, uid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// procOfUID reports whether pid is alive (not a zombie) and any of its
// uids is uid.
func procOfUID(pid, uid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return false
	}
	var state, uids []byte
	for _, line := range bytes.Split(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("State:")); ok {
			state = bytes.TrimSpace(v)
		} else if v, ok := bytes.CutPrefix(line, []byte("Uid:")); ok {
			uids = v
		}
	}
	if len(state) > 0 && (state[0] == 'Z' || state[0] == 'X') {
		return false
	}
	want := strconv.Itoa(uid)
	for _, f := range bytes.Fields(uids) {
		if string(f) == want {
			return true
		}
	}
	return false
}

// killPinned SIGKILLs pid if, once pinned by a pidfd, it is still a live
// process of uid, and reports whether it did.
func killPinned(pid, uid int) bool {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return false // gone
	}
	defer unix.Close(fd)
	if !procOfUID(pid, uid) { // the PID now names another process
		return false
	}
	return unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0) == nil
}

// wipeTmpOf removes what uid owns in the shared temporary folders: their
// entries, and the entries of their world-writable subfolders (such as
// /tmp/.X11-unix). Nothing of uid runs any more, so nothing races it, and
// RemoveAll never follows a symlink.
func wipeTmpOf(uid int) error {
	var errs []error
	for _, dir := range tmpDirs {
		errs = append(errs, wipeOwned(dir, uid, 1))
	}
	return errors.Join(errs...)
}

func wipeOwned(dir string, uid, depth int) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	var errs []error
	for _, e := range ents {
		path := filepath.Join(dir, e.Name())
		var st syscall.Stat_t
		if err := syscall.Lstat(path, &st); err != nil {
			continue
		}
		switch {
		case int(st.Uid) == uid:
			if err := os.RemoveAll(path); err != nil {
				errs = append(errs, err)
			}
		case depth > 0 && e.IsDir() && st.Mode&0o002 != 0:
			errs = append(errs, wipeOwned(path, uid, depth-1))
		}
	}
	return errors.Join(errs...)
}
