package local_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/internal/testmount"
	"github.com/corral-dev/corral-vdi-portal/local"
	"github.com/corral-dev/corral-vdi-portal/store"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// mustFilesMember starts a sandboxed session desktop (root: a uid of its
// own) and returns its backend, ref and home on the host; tmpfsHome, when
// set, puts its home on a tmpfs of that size first.
func mustFilesMember(t *testing.T, tmpfsHome string) (*local.Backend, vdi.Ref, string) {
	t.Helper()
	b, ref, home, _ := mustFilesMemberWith(t, tmpfsHome, local.Limits{})
	return b, ref, home
}

// mustFilesMemberWith is mustFilesMember for a desktop under limits; it
// returns the desktops' sandbox too.
func mustFilesMemberWith(t *testing.T, tmpfsHome string, limits local.Limits) (*local.Backend, vdi.Ref, string, *local.Sandbox) {
	t.Helper()
	ctx := context.Background()
	dir, db, sandbox := mustSandboxed(t, "cfl", local.SandboxConfig{UIDs: "201800-201899", Limits: limits})
	b, err := local.New(ctx, local.Config{DB: db, Dir: filepath.Join(dir, "local"), Log: slog.New(slog.DiscardHandler), Sandbox: sandbox})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.StopAll(context.Background()) })
	if err := db.CreateLocalPool(ctx, store.LocalPool{Pool: vdi.Pool{Name: "f", Kind: vdi.KindCT, Mode: vdi.ModeEphemeral, Source: "session"}, Members: []string{"f-1"}}); err != nil {
		t.Fatal(err)
	}
	ref := vdi.Ref{Namespace: local.Namespace, Name: "f-1"}
	home := filepath.Join(dir, "local", "members", "f-1", "home")
	if tmpfsHome != "" {
		if err := os.MkdirAll(home, 0o700); err != nil {
			t.Fatal(err)
		}
		testmount.Tmpfs(t, home, tmpfsHome)
	}
	if err := b.Start(ctx, ref); err != nil {
		t.Fatal(err)
	}
	return b, ref, home, sandbox
}

func codeOf(err error) vdi.Code {
	var e *vdi.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// TestFiles_UploadIntoTheDesktop: an upload lands in ~/Uploads under its
// base name, as the desktop's own user, with the same bytes (read from the
// desktop's terminal); a second one of the same name gets a number; one
// over the file limit or the quota is refused and leaves nothing.
func TestFiles_UploadIntoTheDesktop(t *testing.T) {
	b, ref, _ := mustFilesMember(t, "")
	ctx := context.Background()
	body := []byte("quarterly figures\n")
	got, err := b.Upload(ctx, ref, `C:\Users\alice\..\report.txt`, bytes.NewReader(body), 1<<20, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if got.Name != "report.txt" || got.Size != int64(len(body)) {
		t.Errorf("Upload = %+v; want report.txt of %d bytes", got, len(body))
	}
	out := shell(t, b, ref, `cat ~/Uploads/report.txt; echo OWNER=$(stat -c %u ~/Uploads/report.txt)=$(id -u)`)
	if !strings.Contains(out, "quarterly figures") {
		t.Errorf("in the desktop: %q; want the uploaded text", out)
	}
	if i := strings.LastIndex(out, "OWNER="); i < 0 || !sameUID(out[i+6:]) {
		t.Errorf("in the desktop: %q; want the file to be the desktop user's", out)
	}
	if again, err := b.Upload(ctx, ref, "report.txt", bytes.NewReader(body), 1<<20, 1<<20); err != nil || again.Name != "report (2).txt" {
		t.Errorf("second upload = %+v, %v; want report (2).txt", again, err)
	}
	if _, err := b.Upload(ctx, ref, "big.bin", bytes.NewReader(make([]byte, 2000)), 1000, 1<<20); codeOf(err) != vdi.ETooLarge {
		t.Errorf("upload over the file limit: %v; want too large", err)
	}
	if _, err := b.Upload(ctx, ref, "more.bin", bytes.NewReader(make([]byte, 990)), 1000, 1000); codeOf(err) != vdi.EFull {
		t.Errorf("upload over the quota: %v; want full", err)
	}
	for _, name := range []string{"..", ".", "/", " . "} {
		if _, err := b.Upload(ctx, ref, name, strings.NewReader("x"), 10, 10); codeOf(err) != vdi.EInvalid {
			t.Errorf("upload named %q: %v; want invalid", name, err)
		}
	}
	if out := shell(t, b, ref, `ls -A ~/Uploads | tr '\n' ' '`); strings.Contains(out, ".part") || strings.Contains(out, "big.bin") || strings.Contains(out, "more.bin") {
		t.Errorf("~/Uploads after the refusals: %q; want no partial files", out)
	}
}

func sameUID(s string) bool {
	a, rest, ok := strings.Cut(s, "=")
	if !ok {
		return false
	}
	return a != "" && strings.HasPrefix(rest, a)
}

// TestFiles_DownloadsOnlyTheUsersOwnFiles: ~/Downloads lists and serves
// the desktop user's regular files; a symlink to the portal's files, a
// hard link, a FIFO and ~/Uploads swapped for a link to /etc are never
// followed.
func TestFiles_DownloadsOnlyTheUsersOwnFiles(t *testing.T) {
	b, ref, home := mustFilesMember(t, "")
	ctx := context.Background()
	secret := filepath.Join(filepath.Dir(home), "uid") // the portal's record, root's
	shell(t, b, ref, `mkdir -p ~/Downloads && printf 'made in the desktop' > ~/Downloads/out.txt && ln -s `+secret+` ~/Downloads/secret && mkfifo ~/Downloads/fifo && ln /etc/hostname ~/Downloads/hard 2>/dev/null; true`)
	files, err := b.Downloads(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 1 || files[0].Name != "out.txt" || files[0].Size != int64(len("made in the desktop")) {
		t.Errorf("Downloads = %+v; want only out.txt", files)
	}
	f, _, err := b.Download(ctx, ref, "out.txt")
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(f)
	f.Close()
	if string(data) != "made in the desktop" {
		t.Errorf("out.txt = %q", data)
	}
	for _, name := range []string{"secret", "fifo", "hard"} {
		done := make(chan error, 1)
		go func() {
			f, _, err := b.Download(ctx, ref, name)
			if f != nil {
				f.Close()
			}
			done <- err
		}()
		select {
		case err := <-done:
			if c := codeOf(err); c != vdi.EForbidden && c != vdi.ENotFound {
				t.Errorf("Download(%s): %v; want refused", name, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("Download(%s) hangs", name)
		}
	}
	for _, name := range []string{"../uid", "..", "a/b"} {
		if _, _, err := b.Download(ctx, ref, name); codeOf(err) != vdi.EInvalid {
			t.Errorf("Download(%q): %v; want invalid", name, err)
		}
	}
	// ~/Uploads swapped for a link: the upload is refused, /etc untouched.
	shell(t, b, ref, `rm -rf ~/Uploads; ln -s /etc ~/Uploads`)
	if _, err := b.Upload(ctx, ref, "planted.conf", strings.NewReader("x"), 10, 10); codeOf(err) != vdi.EConflict {
		t.Errorf("upload through a symlinked ~/Uploads: %v; want a conflict", err)
	}
	if _, err := os.Lstat("/etc/planted.conf"); err == nil {
		os.Remove("/etc/planted.conf")
		t.Fatal("an upload followed ~/Uploads -> /etc")
	}
}

// TestFiles_FullDisk: an upload that does not fit on the desktop's disk is
// refused as full and leaves no partial file.
func TestFiles_FullDisk(t *testing.T) {
	b, ref, _ := mustFilesMember(t, "2m")
	_, err := b.Upload(context.Background(), ref, "huge.bin", bytes.NewReader(make([]byte, 4<<20)), 64<<20, 64<<20)
	if codeOf(err) != vdi.EFull {
		t.Fatalf("upload onto a full disk: %v; want full", err)
	}
	if out := shell(t, b, ref, `ls -A ~/Uploads | tr '\n' ' '`); strings.Contains(out, "huge") || strings.Contains(out, ".part") {
		t.Errorf("~/Uploads: %q; want nothing left", out)
	}
}

// TestSanitizeFileName keeps one harmless name of what a browser sends.
func TestSanitizeFileName(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"report.pdf", "report.pdf"},
		{`C:\Users\me\report.pdf`, "report.pdf"},
		{"../../etc/passwd", "passwd"},
		{"..hidden", "hidden"},
		{"a\x01b.txt", "a_b.txt"},
		{"invoice\u202efdp.exe", "invoice_fdp.exe"}, // RIGHT-TO-LEFT OVERRIDE
		{"x\u2066y\u2069.txt", "x_y_.txt"},          // isolates
		{"zero\u200bwidth.txt", "zero_width.txt"},
		{"Grüße 日本語 ✓.txt", "Grüße 日本語 ✓.txt"},
	} {
		if got, err := local.SanitizeFileName(tc.in); err != nil || got != tc.want {
			t.Errorf("SanitizeFileName(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}
