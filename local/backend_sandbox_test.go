package local_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/local"
	"github.com/corral-dev/corral-vdi-portal/store"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// shell types line into a terminal of ref and returns its output up to
// the (computed) marker the line ends with.
func shell(t *testing.T, b *local.Backend, ref vdi.Ref, line string) string {
	t.Helper()
	c, err := b.Dial(context.Background(), ref, vdi.ProtocolTerminal)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte(line + "; echo DO''NE\r"))
	var out strings.Builder
	buf := make([]byte, 4096)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "DONE\r\n") {
		if time.Now().After(deadline) {
			t.Fatalf("terminal said %q", out.String())
		}
		c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		n, _ := c.Read(buf)
		out.Write(buf[:n])
	}
	return out.String()
}

// TestBackend_SandboxedPersistentMember: a persistent member keeps its uid
// and its home across a stop and a restart of the backend (the uid is
// recorded in the member's folder), and the home stays its uid's.
func TestBackend_SandboxedPersistentMember(t *testing.T) {
	ctx := context.Background()
	dir, db, sandbox := mustSandboxed(t, "csb", local.SandboxConfig{UIDs: "201700-201799"})
	open := func() *local.Backend {
		b, err := local.New(ctx, local.Config{DB: db, Dir: filepath.Join(dir, "local"), Log: slog.New(slog.DiscardHandler), Sandbox: sandbox})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	b := open()
	if err := db.CreateLocalPool(ctx, store.LocalPool{Pool: vdi.Pool{Name: "keep", Kind: vdi.KindCT, Mode: vdi.ModePersistent, Source: "session"}, Members: []string{"keep-1"}}); err != nil {
		t.Fatal(err)
	}
	ref := vdi.Ref{Namespace: local.Namespace, Name: "keep-1"}
	if err := b.Start(ctx, ref); err != nil {
		t.Fatal(err)
	}
	first := shell(t, b, ref, "echo kept > ~/file; echo UID=$(id -u)")
	if !strings.Contains(first, "UID=2017") {
		t.Fatalf("shell: %q; want a uid of the range", first)
	}
	uid := first[strings.Index(first, "UID=2017")+4 : strings.Index(first, "UID=2017")+10]

	// A restarted backend adopts the running desktop under the same uid.
	b2 := open()
	if m, _ := b2.Member(ctx, ref); m.Power != vdi.PowerRunning {
		t.Fatalf("after a restart: %+v; want the desktop adopted", m)
	}
	if out := shell(t, b2, ref, "cat ~/file; echo UID=$(id -u)"); !strings.Contains(out, "UID="+uid) || !strings.Contains(out, "kept") {
		t.Errorf("adopted desktop's shell: %q; want uid %s and the file", out, uid)
	}
	// Stopped and started again: same uid, the home kept and still its own.
	if err := b2.Stop(ctx, ref); err != nil {
		t.Fatal(err)
	}
	if err := b2.Start(ctx, ref); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b2.StopAll(context.Background()) })
	if out := shell(t, b2, ref, "cat ~/file; echo UID=$(id -u)"); !strings.Contains(out, "UID="+uid) || !strings.Contains(out, "kept") {
		t.Errorf("restarted desktop's shell: %q; want uid %s and the file", out, uid)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(dir, "local", "members", "keep-1", "home", "file"), &st); err != nil || int(st.Uid) == 0 {
		t.Errorf("home file owner %d, %v; want the member's uid", st.Uid, err)
	}
}

// mustSandboxed makes a data dir (under os.TempDir, named from prefix,
// 0711 as the portal's) with its SQLite store, and a sandbox of cfg (its
// uid registry a temporary dir of the test's), all gone when the test
// ends; the sandbox's host fence is lifted after the test's own cleanups
// (a backend's StopAll). It skips the test unless root with the desktops'
// programs.
func mustSandboxed(t *testing.T, prefix string, cfg local.SandboxConfig) (string, *store.DB, *local.Sandbox) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("sandboxed desktops need root")
	}
	if err := local.CheckDesktopDeps(); err != nil {
		t.Skip(err)
	}
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o711)
	db, err := store.Open(context.Background(), filepath.Join(dir, "portal.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	cfg.Registry = t.TempDir()
	sandbox, err := local.NewSandbox(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sandbox.UnfenceHost() }) // New installs it
	return dir, db, sandbox
}
