package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAttack_PersistentHomeFill fills a persistent desktop's home from its
// own terminal: on a root portal the write stops at the member's home
// image (32 MiB), the portal still writes its database, and what the user
// kept survives a release (persistent homes are never wiped). A portal as
// nobody cannot mount the image: its log says the home has no bound.
// Deleting the pool takes the image and its mount with the member.
func TestAttack_PersistentHomeFill(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the test starts portals as root and as nobody")
	}
	env := []string{"CORRAL_VDI_DEMO_POOL_SIZE=1", "CORRAL_VDI_ADMINS=admin",
		"CORRAL_VDI_DESKTOP_LIMITS=nproc=400,nofile=1024,as=8G,memory=600M,disk=64M,home=32M"}
	t.Run("root", func(t *testing.T) { persistentHomeFill(t, MustStartPortal(t, env...), true) })
	t.Run("nobody", func(t *testing.T) { persistentHomeFill(t, MustStartPortalAsNobody(t, env...), false) })
}

func persistentHomeFill(t *testing.T, p *Portal, bounded bool) {
	create := `{"name":"keep","mode":"persistent","size":1,"policy":{"network":"none"}}`
	if code := p.APIBody(t, "admin", "POST", "/api/vdi/pools", create, nil); code != 200 && code != 201 {
		t.Fatalf("creating a persistent pool: %d", code)
	}
	var d desktop
	if code := p.API(t, "alice", "POST", "/api/vdi/pools/local/keep/claim", &d); code != 200 || d.Power != "running" {
		t.Fatalf("alice's claim: %d %+v", code, d)
	}
	term := openTerminal(t, p, "alice", d.Name)
	if !bounded {
		if !strings.Contains(p.Log(), "persistent homes have no disk bound") {
			t.Errorf("a portal as nobody has no home image, and its log does not say so:\n%s", p.Log())
		}
		t.Logf("attack persistent-disk-fill: unbounded here, as the portal's log says")
		return
	}
	out := term.run("echo kept-41 > ~/notes; dd if=/dev/zero of=~/fill bs=1M count=200 2>&1 | grep -o 'No space left' | sed s/^/FULL-/; echo SIZE-$(du -m ~/fill | cut -f1)-", 60*time.Second)
	if !strings.Contains(out, "FULL-No space left") || strings.Contains(out, "SIZE-200-") {
		t.Errorf("attack persistent-disk-fill SUCCEEDED: %q; want refused at the 32 MiB home bound", out)
	} else {
		t.Logf("attack persistent-disk-fill: refused at the bound")
	}
	term.ws.Close()
	if code := p.APIBody(t, "admin", "POST", "/api/vdi/pools", `{"name":"after","size":1}`, nil); code != 200 && code != 201 {
		t.Errorf("after the disk fill, creating a pool (a database write): %d", code)
	}
	img := filepath.Join(p.DataDir, "local", "members", d.Name, "home.img")
	if fi, err := os.Lstat(img); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the member's home image %s: %v %v; want it there, 0600", img, fi, err)
	}
	if code := p.API(t, "alice", "POST", "/api/vdi/desktops/local/"+d.Name+"/release", nil); code != 200 {
		t.Fatalf("alice's release: %d", code)
	}
	if code := p.API(t, "alice", "POST", "/api/vdi/pools/local/keep/claim", &d); code != 200 || d.Power != "running" {
		t.Fatalf("alice's claim again: %d %+v", code, d)
	}
	term = openTerminal(t, p, "alice", d.Name)
	if out := term.run("cat ~/notes; rm -f ~/fill", 20*time.Second); !strings.Contains(out, "kept-41") {
		t.Errorf("after a release the persistent home says %q; want its notes kept", out)
	}
	// Deleting the pool takes the image and its mount with the member.
	term.ws.Close()
	if code := p.API(t, "alice", "POST", "/api/vdi/desktops/local/"+d.Name+"/release", nil); code != 200 {
		t.Fatalf("alice's last release: %d", code)
	}
	if code := p.API(t, "admin", "DELETE", "/api/vdi/pools/local/keep", nil); code != 200 && code != 204 {
		t.Fatalf("deleting the persistent pool: %d", code)
	}
	home := filepath.Dir(img) + "/home"
	if !eventually(20*time.Second, func() bool {
		mounts, _ := os.ReadFile("/proc/self/mounts")
		_, err := os.Lstat(img)
		return os.IsNotExist(err) && !strings.Contains(string(mounts), " "+home+" ")
	}) {
		t.Errorf("after the pool was deleted, its member's home image %s or its mount is still there", img)
	}
}
