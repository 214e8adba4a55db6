package local

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// Files in and out of a session desktop: uploads land in the member's
// ~/Uploads, downloads come from its ~/Downloads. The home belongs to the
// member's uid, which may plant symlinks, FIFOs or hard links there and
// swap folders while the portal works, so every step goes through
// directory file descriptors: openat2 with RESOLVE_BENEATH and
// RESOLVE_NO_SYMLINKS from the home folder (whose own parent only the
// portal can write), files created with O_EXCL and handed to the member's
// uid by fchown on the descriptor, and only regular files of the member's
// uid with one link are ever read.

// Folder names in a member's home.
const (
	uploadsDir   = "Uploads"
	downloadsDir = "Downloads"
)

// openat2 is unix.Openat2; a test replaces it to play a kernel without it.
var openat2 = unix.Openat2

// homeFiles is the home folder of one member, opened for file transfer.
type homeFiles struct {
	ref  vdi.Ref
	home int // directory fd of the member's home
	uid  int // who owns what the desktop writes
}

// HasFiles reports whether ref is a session desktop of the backend (VMs
// have no home the portal can reach).
func (b *Backend) HasFiles(ctx context.Context, ref vdi.Ref) bool {
	pool, err := b.poolOf(ctx, ref)
	return err == nil && !b.isVMPool(ctx, pool)
}

// openHome opens member ref's home for file transfer.
func (b *Backend) openHome(ctx context.Context, ref vdi.Ref) (*homeFiles, error) {
	pool, err := b.poolOf(ctx, ref)
	if err != nil {
		return nil, err
	}
	if b.isVMPool(ctx, pool) {
		return nil, vdi.Errorf(vdi.EInvalid, "Use a session desktop for the Files panel, or move files over the VM's own network.",
			"Not supported: %s is a VM, and the portal moves files only in and out of session desktops.", ref)
	}
	uid := os.Getuid()
	if b.sandbox != nil && !b.sandbox.Namespaced() {
		if uid, err = readMemberUID(b.memberDir(ref.Name)); err != nil {
			return nil, vdi.Errorf(vdi.EUnavailable, "Start the desktop once, then try again.", "Desktop %s has no home yet.", ref)
		}
	}
	home := b.spec(ref.Name).Home
	// The home's parent is the portal's own member folder: no one else
	// can put a link in its place.
	fd, err := unix.Open(home, unix.O_DIRECTORY|unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil, vdi.Errorf(vdi.EUnavailable, "Start the desktop once, then try again.", "Desktop %s has no home yet.", ref)
	} else if err != nil {
		return nil, fmt.Errorf("local: open home of %s: %w", ref, err)
	}
	h := &homeFiles{ref: ref, home: fd, uid: uid}
	if err := h.check(fd, "home folder"); err != nil {
		h.Close()
		return nil, err
	}
	return h, nil
}

// Close releases the home's descriptor.
func (h *homeFiles) Close() error { return unix.Close(h.home) }

// check refuses a folder fd that the member's uid does not own: the
// portal never works inside a folder of another uid.
func (h *homeFiles) check(fd int, what string) error {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR || int(st.Uid) != h.uid {
		return vdi.Errorf(vdi.EConflict, "Remove it in the desktop (or rename it) and try again; the portal makes a fresh one.",
			"The desktop's %s is not a folder of its own user, so the portal will not use it.", what)
	}
	return nil
}

// sub opens the folder name of the home; create makes it (the member's).
func (h *homeFiles) sub(name string, create bool) (int, error) {
	how := &unix.OpenHow{Flags: unix.O_DIRECTORY | unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_CLOEXEC, Resolve: resolveBeneath}
	fd, err := openat2(h.home, name, how)
	if errors.Is(err, unix.ENOENT) && create {
		if err := unix.Mkdirat(h.home, name, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
			return -1, fmt.Errorf("local: make ~/%s of %s: %w", name, h.ref, err)
		}
		if fd, err = openat2(h.home, name, how); err == nil && h.uid != os.Getuid() {
			var st unix.Stat_t
			if unix.Fstat(fd, &st) == nil && int(st.Uid) == os.Getuid() { // the one just made
				err = unix.Fchown(fd, h.uid, h.uid)
			}
		}
	}
	switch {
	case errors.Is(err, unix.ENOSYS):
		return -1, vdi.Errorf(vdi.EUnavailable, "Run the portal on Linux 5.6 or newer.", "File transfer needs openat2, which this kernel lacks.")
	case errors.Is(err, unix.ELOOP), errors.Is(err, unix.ENOTDIR), errors.Is(err, unix.EXDEV):
		return -1, vdi.Errorf(vdi.EConflict, "Remove it in the desktop and try again; the portal makes a real folder.",
			"~/%s in the desktop is a link or not a folder, so the portal will not use it.", name)
	case err != nil:
		return -1, err
	}
	if err := h.check(fd, "~/"+name); err != nil {
		unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// regular returns the regular files of the folder fd that the member owns
// with one link: what may be listed and downloaded.
func (h *homeFiles) regular(fd int) ([]vdi.FileInfo, error) {
	dup, err := unix.Dup(fd)
	if err != nil {
		return nil, err
	}
	dir := os.NewFile(uintptr(dup), "folder")
	defer dir.Close()
	ents, err := dir.ReadDir(-1)
	if err != nil {
		return nil, err
	}
	var out []vdi.FileInfo
	for _, e := range ents {
		var st unix.Stat_t
		if unix.Fstatat(fd, e.Name(), &st, unix.AT_SYMLINK_NOFOLLOW) != nil || !h.ownRegular(&st) {
			continue
		}
		out = append(out, vdi.FileInfo{Name: e.Name(), Size: st.Size, Modified: time.Unix(st.Mtim.Unix())})
	}
	return out, nil
}

// ownRegular reports whether st is a regular file of the member's uid
// with one link (a hard link to another file is not the member's to give).
func (h *homeFiles) ownRegular(st *unix.Stat_t) bool {
	return st.Mode&unix.S_IFMT == unix.S_IFREG && int(st.Uid) == h.uid && st.Nlink == 1
}

// Downloads lists the files of member ref's ~/Downloads, newest first.
func (b *Backend) Downloads(ctx context.Context, ref vdi.Ref) ([]vdi.FileInfo, error) {
	h, err := b.openHome(ctx, ref)
	if err != nil {
		return nil, err
	}
	defer h.Close()
	fd, err := h.sub(downloadsDir, false)
	if errors.Is(err, unix.ENOENT) {
		return []vdi.FileInfo{}, nil
	} else if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	files, err := h.regular(fd)
	if err != nil {
		return nil, fmt.Errorf("local: list ~/Downloads of %s: %w", ref, err)
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Modified.After(files[j].Modified) })
	if files == nil {
		files = []vdi.FileInfo{}
	}
	return files, nil
}

// Download opens the file name of member ref's ~/Downloads for reading.
func (b *Backend) Download(ctx context.Context, ref vdi.Ref, name string) (*os.File, vdi.FileInfo, error) {
	if !plainName(name) {
		return nil, vdi.FileInfo{}, vdi.Errorf(vdi.EInvalid, "Pick a file from the list of ~/Downloads.", "%q is not a file name.", name)
	}
	h, err := b.openHome(ctx, ref)
	if err != nil {
		return nil, vdi.FileInfo{}, err
	}
	defer h.Close()
	dfd, err := h.sub(downloadsDir, false)
	if errors.Is(err, unix.ENOENT) {
		return nil, vdi.FileInfo{}, notInDownloads(name)
	} else if err != nil {
		return nil, vdi.FileInfo{}, err
	}
	defer unix.Close(dfd)
	// O_NONBLOCK: a FIFO planted under the name must not hang the portal.
	fd, err := openat2(dfd, name, &unix.OpenHow{Flags: unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC, Resolve: resolveBeneath})
	if errors.Is(err, unix.ENOENT) {
		return nil, vdi.FileInfo{}, notInDownloads(name)
	} else if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.EXDEV) {
		return nil, vdi.FileInfo{}, notDownloadable(name)
	} else if err != nil {
		return nil, vdi.FileInfo{}, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || !h.ownRegular(&st) {
		unix.Close(fd)
		return nil, vdi.FileInfo{}, notDownloadable(name)
	}
	f := os.NewFile(uintptr(fd), name)
	return f, vdi.FileInfo{Name: name, Size: st.Size, Modified: time.Unix(st.Mtim.Unix())}, nil
}

func notInDownloads(name string) error {
	return vdi.Errorf(vdi.ENotFound, "Save the file to ~/Downloads in the desktop, then refresh the list.", "No file %q in ~/Downloads.", name)
}

func notDownloadable(name string) error {
	return vdi.Errorf(vdi.EForbidden, "Copy the file itself into ~/Downloads (not a link to it), then try again.",
		"%q in ~/Downloads is a link, a special file or not the desktop user's own, so it cannot be downloaded.", name)
}

// Upload writes body (at most max bytes, and within quota bytes for all of
// ~/Uploads) into member ref's ~/Uploads under a sanitised name; a name
// taken gets " (2)", " (3)"… The file is the member's, and is only ever
// visible whole.
func (b *Backend) Upload(ctx context.Context, ref vdi.Ref, name string, body io.Reader, max, quota int64) (vdi.FileInfo, error) {
	name, err := SanitizeFileName(name)
	if err != nil {
		return vdi.FileInfo{}, err
	}
	h, err := b.openHome(ctx, ref)
	if err != nil {
		return vdi.FileInfo{}, err
	}
	defer h.Close()
	u := b.runningUser(ref.Name)
	if u == nil && b.sandbox.chargesMemory() { // its memory is counted only while it runs
		return vdi.FileInfo{}, vdi.Errorf(vdi.EUnavailable, "Start the desktop, then upload again.",
			"Desktop %s is not running: an upload counts against the memory of a running desktop.", ref)
	}
	if fd, err := h.sub(downloadsDir, true); err == nil { // so the user finds where downloads go
		unix.Close(fd)
	}
	ufd, err := h.sub(uploadsDir, true)
	if err != nil {
		return vdi.FileInfo{}, err
	}
	defer unix.Close(ufd)
	held, err := h.regular(ufd)
	if err != nil {
		return vdi.FileInfo{}, err
	}
	var used int64
	for _, f := range held {
		used += f.Size
	}
	room := min(max, quota-used)
	if room <= 0 {
		return vdi.FileInfo{}, vdi.Errorf(vdi.EFull, "Delete or move files out of ~/Uploads in the desktop, then try again.",
			"~/Uploads of %s is full: it holds %s of the %s allowed.", ref, sizeText(used), sizeText(quota))
	}
	tmp := ".corral-upload-" + randomHex() + ".part"
	fd, err := unix.Openat(ufd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return vdi.FileInfo{}, fmt.Errorf("local: upload into %s: %w", ref, err)
	}
	f := os.NewFile(uintptr(fd), tmp)
	fail := func(err error) (vdi.FileInfo, error) {
		f.Close()
		unix.Unlinkat(ufd, tmp, 0)
		return vdi.FileInfo{}, err
	}
	if h.uid != os.Getuid() {
		if err := unix.Fchown(fd, h.uid, h.uid); err != nil {
			return fail(fmt.Errorf("local: upload into %s: %w", ref, err))
		}
	}
	n, err := writeAsDesktop(ctx, u, f, io.LimitReader(body, room+1))
	switch {
	case errors.Is(err, errMemoryFull):
		return fail(vdi.Errorf(vdi.EFull, "Free the desktop's memory (close programs; delete or move files from ~/Uploads and /tmp, which it holds in memory), then upload again.",
			"The desktop's memory is full: %q did not fit (its limit is %s, and what its home and /tmp hold counts against it).", name, sizeText(int64(u.Limits.Memory))))
	case errors.Is(err, unix.ENOSPC), errors.Is(err, unix.EDQUOT):
		return fail(vdi.Errorf(vdi.EFull, "Free space in the desktop (delete files you no longer need), then upload again.",
			"The desktop's disk is full: %q did not fit.", name))
	case err != nil:
		return fail(err)
	case n > room && room < max:
		return fail(vdi.Errorf(vdi.EFull, "Delete or move files out of ~/Uploads in the desktop, then try again.",
			"%q does not fit: ~/Uploads of %s may hold %s in all, and %s is left.", name, ref, sizeText(quota), sizeText(room)))
	case n > room:
		return fail(vdi.Errorf(vdi.ETooLarge, "Split the file, or ask an admin to raise CORRAL_VDI_UPLOAD_MAX.",
			"%q is larger than the %s a file may have.", name, sizeText(max)))
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	final := name
	for i := 2; ; i++ {
		err = unix.Renameat2(ufd, tmp, ufd, final, unix.RENAME_NOREPLACE)
		if !errors.Is(err, unix.EEXIST) || i > 99 {
			break
		}
		ext := filepath.Ext(name)
		final = fmt.Sprintf("%s (%d)%s", strings.TrimSuffix(name, ext), i, ext)
	}
	if err != nil {
		return fail(fmt.Errorf("local: upload %q into %s: %w", name, ref, err))
	}
	f.Close()
	return vdi.FileInfo{Name: final, Size: n, Modified: time.Now()}, nil
}

// SanitizeFileName turns a name from a user's machine into one file name
// of a desktop's folder: of a path only its last part is kept, control and
// format characters become "_" (bidi overrides such as U+202E would make
// "invoice\u202Efdp.exe" show as "invoiceexe.pdf" in the desktop's file
// manager), leading dots and spaces go (no hidden files, no "." or ".."),
// and it is cut to 200 bytes, keeping the extension.
func SanitizeFileName(name string) (string, error) {
	if !utf8.ValidString(name) {
		return "", vdi.Errorf(vdi.EInvalid, "Rename the file and upload it again.", "The file name is not valid UTF-8.")
	}
	if i := strings.LastIndexAny(name, "/\\"); i >= 0 { // a path: its last part
		name = name[i+1:]
	}
	s := strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || r == unicode.ReplacementChar {
			return '_'
		}
		return r
	}, name)
	s = strings.TrimLeft(strings.TrimSpace(s), ". ")
	if len(s) > 200 {
		ext := filepath.Ext(s)
		if len(ext) > 20 {
			ext = ""
		}
		cut := 200 - len(ext)
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + ext
	}
	if s == "" {
		return "", vdi.Errorf(vdi.EInvalid, "Rename the file and upload it again.", "%q is not a usable file name.", name)
	}
	return s, nil
}

// plainName reports whether name is one entry of a folder.
func plainName(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsAny(name, "/\x00") && len(name) <= 255
}

func randomHex() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// sizeText writes n bytes for people: 512 MiB, 2 GiB, 900 KiB.
func sizeText(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20:
		return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.0f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
