package local

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
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

// wipeTmpOf removes what uid owns in the shared temporary folders (where
// a desktop of an older portal, which shared the host's /tmp, left files).
// Root never does it itself: another desktop could swap a folder on the
// way for a symlink to anything (renameat2 RENAME_EXCHANGE, with
// fs.protected_symlinks off). GNU find runs as uid instead, never
// following a symlink and never leaving the folder's filesystem, and
// deletes only entries of uid: it can remove nothing uid could not.
func wipeTmpOf(uid int) error {
	find, err := exec.LookPath("find")
	if err != nil {
		return fmt.Errorf("wipe the files of uid %d: find not found: install the Debian package findutils", uid)
	}
	var errs []error
	for _, dir := range tmpDirs {
		if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
			continue
		}
		// -depth (implied by -delete) empties a folder of uid before it goes.
		cmd := exec.Command(find, "-P", dir, "-xdev", "-mindepth", "1", "-user", strconv.Itoa(uid), "-delete")
		cmd.Dir = "/"
		cmd.Env = []string{"PATH=" + defaultDesktopPath, "LC_ALL=C"}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid), Groups: []uint32{}}}
		out, err := cmd.CombinedOutput()
		// find also says so for the folders of others it may not read: those
		// hold nothing of uid's that uid could remove.
		if err != nil && !bytes.Contains(out, []byte("Permission denied")) {
			errs = append(errs, fmt.Errorf("wipe the files of uid %d in %s: %v: %s", uid, dir, err, bytes.TrimSpace(out)))
		}
	}
	return errors.Join(errs...)
}
