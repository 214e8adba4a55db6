package e2e

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/corral-dev/corral-vdi-portal/internal/testmount"
)

// claimRefused claims a desktop of demo as user: the claim holds, the
// desktop does not start, and its reason (which an admin reads; the
// holder reads plain words) and the portal's log say why local desktops
// are off, in one line. The portal has ops as its admin.
func claimRefused(t *testing.T, p *Portal, user, want string) {
	t.Helper()
	var e apiError
	code := p.API(t, user, "POST", "/api/vdi/pools/local/demo/claim", &e)
	var mine []desktop
	p.API(t, user, "GET", "/api/vdi/desktops", &mine)
	if code == 200 || len(mine) != 1 {
		t.Fatalf("claim with desktops off: %d %+v, desktops %+v; want a refusal and the claim kept", code, e, mine)
	}
	// Its holder reads plain words; an admin (ops) reads the one line.
	var d desktop
	p.API(t, user, "GET", "/api/vdi/desktops/local/"+mine[0].Name, &d)
	if d.Power != "failed" || !strings.Contains(d.Reason, "An admin can see why") || strings.Contains(d.Reason, want) {
		t.Errorf("desktop with desktops off, as its holder reads it: %+v; want failed, in plain words", d)
	}
	p.API(t, "ops", "GET", "/api/vdi/desktops/local/"+mine[0].Name, &d)
	if d.Power != "failed" || !strings.Contains(d.Reason, want) || strings.Contains(d.Reason, "\n") {
		t.Errorf("desktop with desktops off, as an admin reads it: %+v; want failed with one line saying %q", d, want)
	}
	if !strings.Contains(p.Log(), want) {
		t.Errorf("the portal's log does not say %q:\n%s", want, p.Log())
	}
}

// collidingRange returns a uid range that includes a real account of this
// host, or one that includes nobody (65534), refused alike.
func collidingRange(t *testing.T) (uids, want string) {
	f, err := os.Open("/etc/passwd")
	if err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Split(sc.Text(), ":")
			if len(fields) < 3 {
				continue
			}
			if uid, err := strconv.Atoi(fields[2]); err == nil && uid >= 1000 && uid < 60000 {
				return strconv.Itoa(uid) + "-" + strconv.Itoa(uid+10), "includes the user " + fields[0]
			}
		}
	}
	return "60000-70000", "includes nobody"
}

// TestSandbox_Refusals: a uid range that collides with an account, a
// portal that is not root and a data directory on a filesystem that
// ignores ownership each turn local desktops off with one clear line; the
// portal still serves, and claims survive until the fix.
func TestSandbox_Refusals(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("these refusals are shown by a root portal")
	}
	t.Run("UIDRangeCollides", func(t *testing.T) {
		data, err := os.MkdirTemp("", "cvd")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { removeData(data) })
		uids, want := collidingRange(t)
		p := mustStartPortalIn(t, data, "CORRAL_VDI_DEMO_POOL_SIZE=1", "CORRAL_VDI_ADMINS=ops", "CORRAL_VDI_DESKTOP_UIDS="+uids)
		claimRefused(t, p, "alice", want)
		var mine []desktop
		p.API(t, "alice", "GET", "/api/vdi/desktops", &mine)
		p.Stop(t)
		if len(mine) != 1 {
			t.Fatalf("alice's desktops while refused: %+v; want her claim kept", mine)
		}
		// Fixed: the same claim, now running.
		p = mustStartPortalIn(t, data, "CORRAL_VDI_DEMO_POOL_SIZE=1")
		var d desktop
		if code := p.API(t, "alice", "POST", "/api/vdi/pools/local/demo/claim", &d); code != 200 || d.Name != mine[0].Name || d.Power != "running" {
			t.Errorf("after the fix alice's claim: %d %+v; want %s running", code, d, mine[0].Name)
		}
	})

	// A portal that is not root on a host that allows no unprivileged user
	// namespaces: bwrap fails as it does on such a kernel.
	t.Run("NotRootWithoutUserNamespaces", func(t *testing.T) {
		data, err := os.MkdirTemp("", "cvd")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { removeData(data) })
		if err := os.Chown(data, nobody, nobody); err != nil {
			t.Fatal(err)
		}
		fake, err := os.MkdirTemp("", "cvbin") // nobody must reach it: not under t.TempDir()'s 0700 folder
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(fake) })
		os.Chmod(fake, 0o755)
		script := "#!/bin/sh\necho 'bwrap: No permissions to creating new namespace, likely because the kernel does not allow non-privileged user namespaces.' >&2\nexit 1\n"
		if err := os.WriteFile(filepath.Join(fake, "bwrap"), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		prefix := []string{"setpriv", "--reuid=" + strconv.Itoa(nobody), "--regid=" + strconv.Itoa(nobody), "--clear-groups", "--"}
		p := startPortalIn(t, data, prefix, "CORRAL_VDI_LISTEN=127.0.0.1:0", "CORRAL_VDI_STOP_DESKTOPS_ON_EXIT=true",
			"CORRAL_VDI_BACKEND=local", "CORRAL_VDI_DEMO_POOL_SIZE=1", "CORRAL_VDI_ADMINS=ops", "HOME="+data, "PATH="+fake+":"+os.Getenv("PATH"))
		claimRefused(t, p, "alice", "allow unprivileged user namespaces")
	})

	t.Run("FilesystemIgnoresOwnership", func(t *testing.T) {
		back, err := os.MkdirTemp("", "cvb")
		if err != nil {
			t.Fatal(err)
		}
		data, err := os.MkdirTemp("", "cvd")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { // after the view is gone
			removeData(data)
			os.RemoveAll(back)
		})
		// A FUSE view of back that accepts chown and chmod and ignores both.
		testmount.Bindfs(t, back, data, "--chown-ignore", "--chmod-ignore")
		if err := os.Chmod(back, 0o711); err != nil {
			t.Fatal(err)
		}
		p := mustStartPortalIn(t, data, "CORRAL_VDI_DEMO_POOL_SIZE=1", "CORRAL_VDI_ADMINS=ops")
		claimRefused(t, p, "alice", "does not keep file owners and modes")
	})
}

// TestSandbox_LimitShowsInTheReason: a desktop that cannot live within its
// limits (here an address space too small for Xvnc) is failed, and its
// reason names the limits.
func TestSandbox_LimitShowsInTheReason(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("sandboxed desktops need the portal to run as root")
	}
	p := MustStartPortal(t, "CORRAL_VDI_DEMO_POOL_SIZE=1", "CORRAL_VDI_ADMINS=ops", "CORRAL_VDI_DESKTOP_LIMITS=as=24M")
	p.API(t, "alice", "POST", "/api/vdi/pools/local/demo/claim", nil)
	var d desktop
	p.API(t, "ops", "GET", "/api/vdi/desktops/local/demo-1", &d) // the diagnostics are an admin's
	if d.Power != "failed" || !strings.Contains(d.Reason, "its limits: 24 MiB address space") {
		t.Errorf("desktop under a 24 MiB address space: %+v; want failed, naming its limits", d)
	}
}
