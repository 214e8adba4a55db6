package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// What an upload writes is the desktop's memory, not the portal's: the
// kernel charges a page of a tmpfs (an ephemeral home, /tmp) or of the
// page cache to the memory cgroup of the process that writes it, so the
// bytes are written by a short-lived cat in the desktop's cgroup (cloned
// into it on cgroup v2; on v1 it moves itself there first), as the
// desktop's uid, into the descriptor the portal opened; the portal only
// feeds it through a pipe and holds no more than a chunk. Before each
// chunk the portal reads the desktop's room (its memory limit less what
// it holds that the kernel cannot reclaim, and a reserve for its
// programs): an upload that would fill it is refused before the kernel's
// OOM killer would end the whole desktop (memory.oom.group).

// uploadChunk is how much the portal passes on between two looks at the
// desktop's room.
const uploadChunk = 1 << 20

// uploadReserve is the least room an upload leaves the desktop's
// programs: a sixteenth of its limit, and at least this.
const uploadReserve = 16 << 20

// errMemoryFull is an upload stopped for the desktop's memory.
var errMemoryFull = errors.New("the desktop's memory is full")

// chargesMemory reports whether desktops have memory cgroups here.
func (s *Sandbox) chargesMemory() bool {
	return s != nil && s.cg != nil && (s.cg.v2 != "" || s.cg.memory != "")
}

// runningUser returns the user of member name's running desktop, or nil.
func (b *Backend) runningUser(name string) *DesktopUser {
	b.mu.Lock()
	defer b.mu.Unlock()
	if rt := b.members[name]; rt != nil && rt.desktop != nil && rt.power == vdi.PowerRunning {
		return rt.desktop.spec.User
	}
	return nil
}

// writeAsDesktop copies body into f, an open file of u's desktop, charged
// to u's memory cgroup (u without one: written by the portal, as there is
// nothing to charge). A full disk is unix.ENOSPC, a full memory
// errMemoryFull.
func writeAsDesktop(ctx context.Context, u *DesktopUser, f *os.File, body io.Reader) (int64, error) {
	if u == nil || u.cg == nil {
		return io.Copy(f, body)
	}
	cat, err := exec.LookPath("cat")
	if err != nil {
		return 0, err
	}
	argv := []string{cat}
	if u.cg.v2 == "" {
		argv = u.cg.joinArgs(argv, false)
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Stdout = f
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.SysProcAttr = u.sysProcAttr(&syscall.SysProcAttr{})
	if u.cg.v2 != "" && !cmd.SysProcAttr.UseCgroupFD { // its cgroup is gone: the desktop stopped
		return 0, vdi.Errorf(vdi.EUnavailable, "Start the desktop, then upload again.", "The desktop stopped during the upload.")
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		closeCgroupFD(cmd.SysProcAttr)
		return 0, err
	}
	err = cmd.Start()
	closeCgroupFD(cmd.SysProcAttr)
	if err != nil {
		return 0, fmt.Errorf("start the upload's writer in the desktop's cgroup: %w", err)
	}
	n, copyErr := copyWithinRoom(in, body, u.cg)
	in.Close()
	waitErr := cmd.Wait()
	switch msg := stderr.String(); {
	case strings.Contains(msg, "No space left"):
		return n, unix.ENOSPC
	case strings.Contains(msg, "quota exceeded"):
		return n, unix.EDQUOT
	case copyErr != nil:
		return n, copyErr
	case waitErr != nil && u.cg.limitHit() != "":
		return n, errMemoryFull
	case waitErr != nil:
		return n, fmt.Errorf("the upload's writer in the desktop: %v: %s", waitErr, lastLine(msg))
	}
	return n, nil
}

// copyWithinRoom copies src to dst a chunk at a time while cg has room
// for the chunk.
func copyWithinRoom(dst io.Writer, src io.Reader, cg *desktopCgroup) (int64, error) {
	buf := make([]byte, uploadChunk)
	var n int64
	for {
		k, rerr := io.ReadFull(src, buf)
		if k > 0 {
			if room, ok := cg.memoryRoom(); ok && room < int64(k) {
				return n, errMemoryFull
			}
			w, err := dst.Write(buf[:k])
			n += int64(w)
			if err != nil {
				return n, err
			}
		}
		if rerr == io.EOF || rerr == io.ErrUnexpectedEOF {
			return n, nil
		} else if rerr != nil {
			return n, rerr
		}
	}
}

// memoryRoom returns how many more bytes d's desktop may hold that the
// kernel cannot reclaim (tmpfs pages among them) before its reserve, and
// whether d has a memory limit at all.
func (d *desktopCgroup) memoryRoom() (int64, bool) {
	limitFile, usageFile, dir := "memory.max", "memory.current", d.v2
	if dir == "" {
		limitFile, usageFile, dir = "memory.limit_in_bytes", "memory.usage_in_bytes", d.memory
	}
	if dir == "" || d.limits.Memory == 0 {
		return 0, false
	}
	limit, err1 := readCount(filepath.Join(dir, limitFile))
	usage, err2 := readCount(filepath.Join(dir, usageFile))
	if err1 != nil || err2 != nil {
		return 0, false
	}
	cacheKey := "file" // v2; v1 calls it cache
	if d.v2 == "" {
		cacheKey = "cache"
	}
	stat := filepath.Join(dir, "memory.stat")
	reclaimable := int64(eventCount(stat, cacheKey)) - int64(eventCount(stat, "shmem"))
	reserve := max(limit/16, uploadReserve)
	return limit - reserve - (usage - max(reclaimable, 0)), true
}

// readCount reads a cgroup file holding one number.
func readCount(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
}
