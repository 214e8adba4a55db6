package local

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/internal/testnet"
)

// TestFindNetTools forces each reason a host cannot give desktops
// outbound network: no pasta, no tun device, a tun device the desktop's
// uid may not open. Each is one line saying what to do.
func TestFindNetTools(t *testing.T) {
	pasta, err1 := exec.LookPath("pasta")
	nsenter, err2 := exec.LookPath("nsenter")
	if err1 != nil || err2 != nil {
		t.Skip("pasta or nsenter missing")
	}
	bin := t.TempDir()
	os.Symlink(nsenter, filepath.Join(bin, "nsenter"))
	tun := filepath.Join(t.TempDir(), "tun")
	saved := tunDevice
	defer func() { tunDevice = saved }()
	for _, tc := range []struct {
		name, want string
		setup      func()
	}{
		{"no-pasta", "install the Debian package passt", func() { t.Setenv("PATH", bin) }},
		{"no-tun", "modprobe tun", func() { os.Symlink(pasta, filepath.Join(bin, "pasta")); tunDevice = tun + "-missing" }},
		{"tun-0600", "chmod 0666 " + tun, func() { os.WriteFile(tun, nil, 0o600); os.Chmod(tun, 0o600); tunDevice = tun }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.setup()
			_, err := findNetTools()
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("err = %v; want one line with %q", err, tc.want)
			}
		})
	}
	os.Chmod(tun, 0o666)
	if _, err := findNetTools(); err != nil {
		t.Errorf("with pasta and a tun device for all: %v", err)
	}
}

// mustServe serves "reached" over HTTP on addr and returns its URL.
func mustServe(t *testing.T, addr string) string {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "reached") })}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return "http://" + ln.Addr().String() + "/"
}

// TestSandboxedDesktop_Network starts desktops with each network policy:
// outbound reaches a server beyond the host, none does not, and neither
// reaches the host's loopback (where the portal listens). An outbound desktop's processes share one network namespace.
func TestSandboxedDesktop_Network(t *testing.T) {
	testnet.TunForAll(t) // else the host fence is not checked: desktops get no network
	s := MustSandbox(t, "202200-202299", Limits{NProc: 300})
	if m := s.NetworkMissing(); m != "" {
		t.Skip(m)
	}
	outside := testnet.OutsideURL(t)
	loopback := mustServe(t, "127.0.0.1:0")
	for _, policy := range []string{NetworkOutbound, NetworkNone} {
		t.Run(policy, func(t *testing.T) {
			spec := MustSandboxedSpec(t, s, "net"+policy[:2])
			spec.Network = policy
			d := MustStartDesktop(t, spec)
			term, err := d.StartTerminal()
			if err != nil {
				t.Fatal(err)
			}
			defer term.Close()
			term.Write([]byte("echo NS=$(readlink /proc/self/ns/net); for u in " + outside + " " + loopback + "; do echo \"GOT $u $(curl -s -m 5 $u || echo refused)\"; done; echo DONE-$((40+2))\r"))
			out := readUntil(t, term, "DONE-42")
			wantOut := map[string]string{NetworkOutbound: "GOT " + outside + " reached", NetworkNone: "GOT " + outside + " refused"}[policy]
			if !strings.Contains(out, wantOut) {
				t.Errorf("%s: the terminal said %q; want %q", policy, out, wantOut)
			}
			if !strings.Contains(out, "GOT "+loopback+" refused") {
				t.Errorf("%s: the desktop reached the host's loopback: %q", policy, out)
			}
			if policy != NetworkOutbound {
				return
			}
			holder, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", spec.User.net.ns))
			if !strings.Contains(out, "NS="+holder) {
				t.Errorf("the terminal's network namespace is not the desktop's %s: %q", holder, out)
			}
			for _, p := range d.procs {
				if p.Name == netPasta && procUID(t, p.PID) != spec.User.UID {
					t.Errorf("pasta runs as uid %d; want the desktop's %d", procUID(t, p.PID), spec.User.UID)
				}
				if p.Name == netPasta { // gone while the portal was away
					p.signal(9)
					p.wait(2 * time.Second)
				}
			}
			// A restarted portal adopts the desktop with its namespace and
			// starts pasta again.
			spec2 := spec
			u := *spec.User
			u.net = nil
			spec2.User = &u
			a, err := AdoptDesktop(spec2, testLogger(t))
			if err != nil {
				t.Fatal(err)
			}
			at, err := a.StartTerminal()
			if err != nil {
				t.Fatal(err)
			}
			defer at.Close()
			at.Write([]byte("echo \"AGAIN $(curl -s -m 5 " + outside + ")\"; echo DONE-$((40+2))\r"))
			if out := readUntil(t, at, "DONE-42"); !strings.Contains(out, "AGAIN reached") {
				t.Errorf("after adoption the terminal said %q; want the server reached", out)
			}
		})
	}
}
