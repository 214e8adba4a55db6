package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// swapScript swaps /tmp/w (a world-writable folder) and /tmp/alt (a
// symlink to root's files) for ever, with renameat2(RENAME_EXCHANGE).
const swapScript = `python3 -c '
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
while True: libc.renameat2(-100, b"/tmp/w", -100, b"/tmp/alt", 2)
'`

// TestAttack_SymlinkSwapDuringRelease is the race of the issue, from
// inside desktops: bob swaps a world-writable folder of /tmp, which holds
// alice's files, for a symlink to root's files, in a loop, while alice's
// desktop is released (and so wiped) again and again. None of root's
// files may go. (On the code before desktops had a /tmp of their own and
// the wipe ran as root, releases deleted root's files through the
// symlink.)
func TestAttack_SymlinkSwapDuringRelease(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the test starts a root portal")
	}
	victim, err := os.MkdirTemp("", "cvd-victim")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(victim)
	os.Chmod(victim, 0o755)
	// Root's folders a0..a49 (6 files each), named as alice's are.
	const dirs, files = 50, 300
	for i := range files {
		dir := filepath.Join(victim, fmt.Sprintf("a%d", i%dirs))
		os.MkdirAll(dir, 0o755)
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%d", i)), nil, 0o644)
	}
	p := MustStartPortal(t, "CORRAL_VDI_DEMO_POOL_SIZE=2")
	b := mustClaim(t, p, "bob", "demo")
	bob := openTerminal(t, p, "bob", b.Name)
	bob.run("mkdir -p /tmp/w && chmod 777 /tmp/w && ln -sfn "+victim+" /tmp/alt && (setsid "+swapScript+" </dev/null >/dev/null 2>&1 &)", 10*time.Second)
	for round := range 5 {
		var a desktop
		if code := p.API(t, "alice", "POST", "/api/vdi/pools/local/demo/claim", &a); code != 200 {
			t.Fatalf("alice's claim %d: %d", round, code)
		}
		alice := openTerminal(t, p, "alice", a.Name)
		alice.run("for i in $(seq 0 49); do mkdir -p /tmp/w/a$i 2>/dev/null && touch /tmp/w/a$i/x 2>/dev/null; done; true", 20*time.Second)
		alice.ws.Close()
		if code := p.API(t, "alice", "POST", "/api/vdi/desktops/local/"+a.Name+"/release", nil); code != 200 && code != 204 {
			t.Fatalf("alice's release %d: %d", round, code)
		}
	}
	left := 0
	for i := range dirs {
		ents, _ := os.ReadDir(filepath.Join(victim, fmt.Sprintf("a%d", i)))
		left += len(ents)
	}
	if n := files - left; n > 0 {
		t.Errorf("attack symlink-swap-during-release SUCCEEDED: the releases deleted %d of root's %d files", n, files)
	} else {
		t.Logf("attack symlink-swap-during-release: refused (root's %d files all there)", files)
	}
}
