package e2e

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/internal/testnet"
)

// Connection identity, attacked from a desktop's uid on this host: the
// rows run their attacker as a child process with the uid of mallory's
// desktop (root's tests may), on the host's own network, so they hold
// whether or not desktops get network namespaces of their own (a
// desktop's user-mode network stack opens its host sockets as its uid).
// Each row is shown to succeed on the code before package connid (the
// issue's closing note says how).

// identityTestAddr is a test-private address (RFC 2544 benchmarking
// range) that row b makes this host's (testnet.AddHostAddr: a local
// route, no address record, so browser tests beside it see no network
// change), inside identityTestNet, which its portal trusts.
// TestAttacks_IdentityNotRoot has a /24 of its own, so that neither
// test's address is in the other's trusted prefix when its portal starts.
const (
	identityTestAddr = "198.18.7.7"
	identityTestNet  = "198.18.7.0/24"
)

func TestAttacks_Identity(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to run the attacker as a desktop's uid")
	}
	sockDir, err := os.MkdirTemp("", "cvd-sock")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(sockDir)
	os.Chmod(sockDir, 0o755) // a desktop's uid may reach the socket: SO_PEERCRED must refuse it
	sock := filepath.Join(sockDir, "http.sock")
	rows := identityAttacks(sock)
	// The host fence keeps a desktop's network stack off every host
	// address; these rows take it down to attack the layer behind it,
	// connection identity (as on a portal that is not root). Their uids
	// are the test process's own, which no other portal's fence covers.
	first := 83000 + os.Getpid()%90*100
	uids := fmt.Sprintf("CORRAL_VDI_DESKTOP_UIDS=%d-%d", first, first+99)
	arenas := map[string]*arena{}
	for _, row := range rows { // portals live for the whole suite
		if key := strings.Join(row.env, " "); arenas[key] == nil {
			arenas[key] = newArena(t, append([]string{uids}, row.env...))
			dropHostFence(t, arenas[key].p, first, first+99)
		}
	}
	runAttacks(t, rows, arenas)
}

func identityAttacks(sock string) []attack {
	forged := func(a *arena, free string) []forgedRequest {
		return []forgedRequest{
			{"POST", "/api/vdi/desktops/local/" + free + "/assign", `{"user":"mallory"}`},
			{"POST", "/api/vdi/users/alice/end-sessions", ""},
			{"PATCH", "/api/vdi/pools/local/demo", `{"access":{"users":["mallory"]}}`},
			{"POST", "/api/vdi/desktops/local/" + a.victim + "/release", ""},
		}
	}
	return []attack{
		// (a) The blind forged-header loop: send as admin and close at
		// once, hundreds of times. A closed socket is listed with uid 0
		// (TIME_WAIT, FIN_WAIT2), which the /proc/net/tcp read took for
		// root's: the changes were made, the answers lost.
		{
			name: "ForgedHeaderSendAndClose",
			attack: func(t *testing.T, a *arena) *http.Response {
				reqs := forged(a, a.freeMember(t))
				var script strings.Builder
				fmt.Fprintf(&script, "for i in $(seq 150); do\n")
				for _, r := range reqs {
					fmt.Fprintf(&script, "exec 3<>/dev/tcp/127.0.0.1/%s && printf '%%s' %s >&3; exec 3>&-\n",
						strings.TrimPrefix(portOf(a.host), ":"), shellQuote(r.raw(a.host, admin)))
				}
				fmt.Fprintf(&script, "done\n")
				asDesktop(t, a, "bash", "-c", script.String())
				// The last one waits for its answer.
				return asDesktopHTTP(t, a, reqs[0], "")
			},
			status: 401,
		},
		// (b) A desktop binds another of the host's addresses, one inside
		// the trusted proxies (as a Docker bridge's 172.17.0.1 is in
		// 172.16.0.0/12), and reads the answers. The table read ran only
		// for loopback or the destination address: the desktop was a
		// trusted proxy.
		{
			name: "ForgedHeaderFromAnotherHostAddress",
			env:  []string{"CORRAL_VDI_TRUSTED_PROXIES=127.0.0.1/32,::1/128," + identityTestNet},
			setup: func(t *testing.T, a *arena) {
				testnet.AddHostAddr(t, identityTestAddr)
			},
			attack: func(t *testing.T, a *arena) *http.Response {
				for _, r := range forged(a, a.freeMember(t)) {
					readBody(asDesktopHTTP(t, a, r, "--interface", identityTestAddr))
				}
				return asDesktopHTTP(t, a, forgedRequest{"GET", "/api/vdi/desktops?all=1", ""}, "--interface", identityTestAddr)
			},
			status: 401,
			after: func(t *testing.T, a *arena, _ *http.Response, _ string) {
				// With that address on the host, such a prefix is refused
				// at start, in one line.
				cmd := newPortalCmd(t, "CORRAL_VDI_BACKEND=local", "CORRAL_VDI_TRUSTED_PROXIES=127.0.0.1/32,"+identityTestNet)
				var out strings.Builder
				cmd.Stdout, cmd.Stderr = &out, &out
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				stop := time.AfterFunc(20*time.Second, func() { cmd.Process.Kill() }) // it started instead
				err := cmd.Wait()
				stop.Stop()
				if err == nil || !strings.Contains(out.String(), "CORRAL_VDI_TRUSTED_PROXIES: "+identityTestNet+" covers "+identityTestAddr) {
					t.Errorf("a portal trusting %s with %s on the host: %v; want a refusal at start\n%s", identityTestNet, identityTestAddr, err, out.String())
				}
			},
		},
		// (c) A desktop holds more connections than a trusted proxy may
		// (512 at 127.0.0.1): they count against the desktop's uid, so a
		// user proxied through 127.0.0.1 is still served.
		{
			name: "DesktopHoldsTheProxysConnections",
			attack: func(t *testing.T, a *arena) *http.Response {
				port := strings.TrimPrefix(portOf(a.host), ":")
				hold := asDesktopStart(t, a, "bash", "-c", fmt.Sprintf(
					"for i in $(seq 600); do exec {fd}<>/dev/tcp/127.0.0.1/%s || exit 1; done; echo held; read", port))
				if line, _ := hold.out.ReadString('\n'); line != "held\n" {
					t.Fatalf("the desktop's uid could not open its connections: %q", line)
				}
				time.Sleep(time.Second) // all accepted and counted
				client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
				for i := 0; ; i++ { // each on a new connection
					req, _ := http.NewRequest("GET", a.p.URL+"/api/vdi/desktops", nil)
					req.Header.Set("Tailscale-User-Login", "alice")
					res, err := client.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					if i == 4 || res.StatusCode != 200 {
						return res
					}
					readBody(res)
				}
			},
			status: 200, says: `"holder":"alice"`,
		},
		// (d) A desktop's uid connects to the Unix socket for same-host
		// proxies and forges the header; SO_PEERCRED names its uid.
		// A proxy that is no desktop (nginx, here) is believed.
		{
			name: "ForgedHeaderThroughUnixSocket",
			env:  []string{"CORRAL_VDI_LISTEN=127.0.0.1:0,unix:" + sock},
			attack: func(t *testing.T, a *arena) *http.Response {
				for _, r := range forged(a, a.freeMember(t)) {
					readBody(asDesktopHTTP(t, a, r, "--unix-socket", sock))
				}
				return asDesktopHTTP(t, a, forgedRequest{"GET", "/api/vdi/desktops?all=1", ""}, "--unix-socket", sock)
			},
			status: 401,
			after: func(t *testing.T, a *arena, _ *http.Response, _ string) {
				n := MustStartNginx(t, "unix:"+sock)
				code := get(t, n.User+"/api/vdi/desktops", nil)
				if code != 200 {
					t.Fatalf("alice through nginx and the Unix socket: %d; want 200", code)
				}
				var mine []desktop
				if code := n.Portal().API(t, "alice", "GET", "/api/vdi/desktops", &mine); code != 200 || len(mine) != 1 || mine[0].Name != a.victim {
					t.Errorf("alice's desktops through nginx and the Unix socket: %d %+v; want %s", code, mine, a.victim)
				}
			},
		},
	}
}

// forgedRequest is one request an attacker forges.
type forgedRequest struct{ method, path, body string }

// raw is r as HTTP/1.1 bytes to host, claiming to be login.
func (r forgedRequest) raw(host, login string) string {
	return fmt.Sprintf("%s %s HTTP/1.1\r\nHost: %s\r\nTailscale-User-Login: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
		r.method, r.path, host, login, len(r.body), r.body)
}

// shellQuote quotes s for bash, escapes and all.
func shellQuote(s string) string {
	return "$'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`, "\r", `\r`, "\n", `\n`).Replace(s) + "'"
}

// desktopUID returns the uid of mallory's desktop.
func desktopUID(t *testing.T, a *arena) int {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(a.p.DataDir, "local", "*", a.mallorys, "uid"))
	if len(files) == 0 {
		t.Fatalf("no uid file of desktop %s under %s", a.mallorys, a.p.DataDir)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	uid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return uid
}

// asDesktopCmd is a command run as the uid of mallory's desktop.
func asDesktopCmd(t *testing.T, a *arena, args ...string) *exec.Cmd {
	uid := strconv.Itoa(desktopUID(t, a))
	return exec.Command("setpriv", append([]string{"--reuid=" + uid, "--regid=" + uid, "--clear-groups", "--"}, args...)...)
}

// asDesktop runs args as the uid of mallory's desktop.
func asDesktop(t *testing.T, a *arena, args ...string) {
	t.Helper()
	if out, err := asDesktopCmd(t, a, args...).CombinedOutput(); err != nil {
		t.Logf("attacker %s: %v\n%s", args[0], err, out)
	}
}

// heldCmd is a command left running, with its stdout.
type heldCmd struct {
	out *bufio.Reader
}

// asDesktopStart starts args as the uid of mallory's desktop; they run
// until the test ends.
func asDesktopStart(t *testing.T, a *arena, args ...string) *heldCmd {
	t.Helper()
	cmd := asDesktopCmd(t, a, args...)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); cmd.Process.Kill(); cmd.Wait() })
	return &heldCmd{out: bufio.NewReader(stdout)}
}

// asDesktopHTTP sends r, forged as the admin, with curl as the uid of
// mallory's desktop (extra curl arguments: how to connect), and returns
// the answer it read.
func asDesktopHTTP(t *testing.T, a *arena, r forgedRequest, curlArgs ...string) *http.Response {
	t.Helper()
	return curlAs(t, desktopUID(t, a), "http://"+a.host, r, curlArgs...)
}

// curlAs sends r to base, forged as the admin, with curl run as uid
// (extra curl arguments: how to connect), and returns the answer.
func curlAs(t *testing.T, uid int, base string, r forgedRequest, curlArgs ...string) *http.Response {
	t.Helper()
	args := append([]string{"--reuid=" + strconv.Itoa(uid), "--regid=" + strconv.Itoa(uid), "--clear-groups", "--",
		"curl", "-sS", "-i", "--max-time", "10", "-X", r.method, "-H", "Tailscale-User-Login: " + admin,
		"-H", "Content-Type: application/json"}, curlArgs...)
	if r.body != "" {
		args = append(args, "--data", r.body)
	}
	out, err := exec.Command("setpriv", append(args, base+r.path)...).Output()
	if err != nil {
		t.Fatalf("curl as uid %d: %v\n%s", uid, err, out)
	}
	res, err := http.ReadResponse(bufio.NewReader(strings.NewReader(string(out))), nil)
	if err != nil {
		t.Fatalf("curl as uid %d: %v\n%s", uid, err, out)
	}
	return res
}

// TestAttacks_IdentityNotRoot: desktops of a portal that is not root run
// as its own uid, and their user-mode network stacks would connect from a
// host address as that uid; such a connection is no trusted proxy's even
// at a trusted-proxy address. The same uid from loopback (which those
// stacks cannot reach) and another local user at that address are.
// Before package connid, the first was a trusted proxy: the table read
// ran only for loopback or the destination address.
func TestAttacks_IdentityNotRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to start the portal as nobody and add a host address")
	}
	const addr = "198.18.8.8" // beside identityTestAddr's /24
	p := MustStartPortalAsNobody(t, "CORRAL_VDI_ADMINS="+admin, "CORRAL_VDI_DEMO_POOL_SIZE=1",
		"CORRAL_VDI_TRUSTED_PROXIES=127.0.0.1/32,::1/128,198.18.8.0/24")
	testnet.AddHostAddr(t, addr)
	list := forgedRequest{"GET", "/api/vdi/desktops?all=1", ""}
	for _, tc := range []struct {
		name string
		uid  int
		from []string
		want int
	}{
		{"portal's uid from another host address", nobody, []string{"--interface", addr}, 401},
		{"portal's uid from loopback", nobody, nil, 200},
		{"another local user from another host address", 4242, []string{"--interface", addr}, 200},
	} {
		res := curlAs(t, tc.uid, p.URL, list, tc.from...)
		if body := readBody(res); res.StatusCode != tc.want {
			t.Errorf("%s, forged as %s: %d; want %d (%s)", tc.name, admin, res.StatusCode, tc.want, body)
		}
	}
}

// readBody reads and closes res's body.
func readBody(res *http.Response) string {
	var b strings.Builder
	bufio.NewReader(res.Body).WriteTo(&b)
	res.Body.Close()
	return b.String()
}
