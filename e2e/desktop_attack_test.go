package e2e

import (
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// desktopAttack is one thing a desktop's user tries from its terminal. script is
// bash that prints "R:<name>:SUCCESS" only if the attack worked (and
// anything else otherwise).
type desktopAttack struct {
	name, script string
}

// desktopAttacks are the ways out of a desktop that must all be shut:
// the portal's data (keys, database, other members), its admin socket,
// its process, trust by loopback, and the host's process table.
func desktopAttacks(data, other, port string, portalPID, nproc int) []desktopAttack {
	base := "http://127.0.0.1:" + port
	ok := func(name string) string { return "echo R:" + name + ":SUCC''ESS" }
	no := func(name string) string { return "echo R:" + name + ":refused" }
	try := func(name, cmd string) desktopAttack {
		return desktopAttack{name, "if " + cmd + "; then " + ok(name) + "; else " + no(name) + "; fi"}
	}
	return []desktopAttack{
		try("read-cookie-keys", "head -c1 "+data+"/cookie.keys >/dev/null 2>&1"),
		try("read-database", "head -c1 "+data+"/portal.db >/dev/null 2>&1"),
		try("list-data-dir", "ls "+data+" >/dev/null 2>&1"),
		try("list-members", "ls "+data+"/local/members >/dev/null 2>&1"),
		try("read-other-home", "cat "+data+"/local/members/"+other+"/home/secret.txt 2>/dev/null | grep -q bob-secret"),
		try("write-other-home", "touch "+data+"/local/members/"+other+"/home/owned 2>/dev/null"),
		try("read-own-state", "cat "+data+"/local/members/*/state/pids >/dev/null 2>&1"),
		try("admin-socket", "curl -sf --max-time 5 --unix-socket "+data+"/admin.sock http://portal/api/vdi/desktops?all=1 >/dev/null 2>&1"),
		try("signal-portal", "kill -TERM "+strconv.Itoa(portalPID)+" 2>/dev/null"),
		try("portal-fds", "ls /proc/"+strconv.Itoa(portalPID)+"/fd >/dev/null 2>&1"),
		try("portal-environ", "head -c1 /proc/"+strconv.Itoa(portalPID)+"/environ >/dev/null 2>&1"),
		// The raw request of the issue, through bash's /dev/tcp.
		try("forged-tailscale-header", `{ exec 3<>/dev/tcp/127.0.0.1/`+port+` && printf 'GET /api/vdi/desktops?all=1 HTTP/1.0\r\nHost: 127.0.0.1:`+port+`\r\nTailscale-User-Login: admin\r\n\r\n' >&3 && head -1 <&3 | grep -q ' 200 '; } 2>/dev/null`),
		try("forged-header-curl", "curl -sf --max-time 5 -H 'Tailscale-User-Login: admin' "+base+"/api/vdi/desktops?all=1 >/dev/null 2>&1"),
		try("sign-in-by-name", "curl -s --max-time 5 -o /dev/null -D - -H 'Origin: "+base+"' --data login=admin "+base+"/signin 2>/dev/null | grep -qi '^set-cookie'"),
		try("raise-process-limit", "(ulimit -u unlimited) 2>/dev/null"),
		// More processes than the limit, with perl's fork (bash retries a
		// failed fork for seconds): count those that started.
		{"exceed-process-limit", fmt.Sprintf(`perl -e 'my @k; for (1..%d) { my $p = fork; last unless defined $p; if (!$p) { sleep 60; exit } push @k, $p } kill "KILL", @k; print "R:exceed-process-limit:", (@k >= %d ? "SUCC"."ESS" : "refused-at-".scalar(@k)), "\n"'`, nproc+50, nproc+50)},
	}
}

// desktopAttackResult returns what an attack's script printed, skipping the
// echo of the command line.
func desktopAttackResult(name, out string) []string {
	return regexp.MustCompile(`(?m)(?:^|\r)R:` + name + `:([A-Za-z0-9-]+)\r?$`).FindStringSubmatch(out)
}

// controlDesktopAttacks runs each attack as the portal's own user (root), where
// every one must succeed but signalling the portal (not tried) and
// raising the process limit (this host may deny even root that): proof
// that each script would notice its own success.
func controlDesktopAttacks(t *testing.T, attacks []desktopAttack, home string) {
	t.Helper()
	for _, at := range attacks {
		if at.name == "signal-portal" || at.name == "raise-process-limit" {
			continue
		}
		cmd := exec.Command("bash", "-c", at.script)
		cmd.Env = append(os.Environ(), "HOME="+home)
		out, _ := cmd.CombinedOutput()
		if r := desktopAttackResult(at.name, string(out)); r == nil || r[1] != "SUCCESS" {
			t.Errorf("control: attack %s as root printed %q; want SUCCESS (the script cannot tell success)", at.name, out)
		}
	}
}

// terminal is a desktop's terminal websocket, opened as its holder.
type terminal struct {
	t  *testing.T
	ws *websocket.Conn
}

func openTerminal(t *testing.T, p *Portal, user, member string) *terminal {
	t.Helper()
	ws, res, err := dialWS(p, user, "/ws/terminal/local/"+member, p.URL)
	if err != nil {
		t.Fatalf("%s's terminal of %s: %v (%v)", user, member, err, status(res))
	}
	t.Cleanup(func() { ws.Close() })
	ws.WriteMessage(websocket.TextMessage, []byte(`{"type":"resize","cols":200,"rows":50}`))
	return &terminal{t: t, ws: ws}
}

// run types script and returns the output up to a marker it prints last.
func (term *terminal) run(script string, d time.Duration) string {
	term.t.Helper()
	marker := fmt.Sprintf("END-%d", time.Now().UnixNano())
	// The marker is printed computed, so the echoed command line never matches.
	line := script + "; echo " + marker[:4] + "''" + marker[4:] + "\r"
	if err := term.ws.WriteMessage(websocket.TextMessage, []byte(line)); err != nil {
		term.t.Fatal(err)
	}
	return readUntilWS(term.t, term.ws, marker+"\r\n", d)
}

// TestAttack_FromInsideADesktop claims two desktops as two users and, from
// inside alice's terminal (through the portal, as she would), tries every
// way out of the desktop: each must fail.
// It runs with the portal as root (desktops get uids of their own, in
// namespaces of their own) and with the portal as nobody (desktops run in
// user namespaces as the portal's uid).
func TestAttack_FromInsideADesktop(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the test starts portals as root and as nobody")
	}
	const nproc = 150
	env := []string{"CORRAL_VDI_DEMO_POOL_SIZE=2", "CORRAL_VDI_ADMINS=admin",
		"CORRAL_VDI_DESKTOP_LIMITS=nproc=" + strconv.Itoa(nproc) + ",nofile=1024,as=8G"}
	t.Run("root/uids", func(t *testing.T) {
		attackFromInside(t, MustStartPortal(t, env...), nproc)
	})
	t.Run("nobody/userns", func(t *testing.T) {
		attackFromInside(t, MustStartPortalAsNobody(t, env...), nproc)
	})
}

// desktopShellUID returns the uid alice's shell runs as, after checking it
// is kept from the portal: a uid of its own under a root portal, else a
// pid namespace of its own.
func desktopShellUID(t *testing.T, p *Portal, term *terminal) int {
	t.Helper()
	who := term.run("echo ID=$(id -u) NS=$(readlink /proc/self/ns/pid)", 10*time.Second)
	m := regexp.MustCompile(`ID=(\d+) NS=(\S+)\r`).FindStringSubmatch(who)
	if m == nil {
		t.Fatalf("alice's shell said %q", who)
	}
	uid, _ := strconv.Atoi(m[1])
	portalUID := uidOf(p.cmd.Process.Pid)
	portalNS, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", p.cmd.Process.Pid))
	switch {
	case uid == 0:
		t.Fatalf("alice's shell runs as root: %q", who)
	case portalUID == 0 && uid == portalUID:
		t.Fatalf("alice's shell runs as the portal's uid %d: %q", uid, who)
	case portalUID != 0 && (uid != portalUID || m[2] == portalNS):
		t.Fatalf("alice's shell %q; want the portal's uid %d in a pid namespace other than the portal's %s", who, portalUID, portalNS)
	}
	return uid
}

// desktopProcs returns the live processes of member's desktop, which runs
// as uid: every process of a uid of its own, or (a portal that is not
// root) those outside the portal's pid namespace that see the member's
// home (at /home/<member>).
func desktopProcs(p *Portal, uid int, member string) []int {
	if uid != uidOf(p.cmd.Process.Pid) {
		return procsOfUID(uid) // a uid of the desktop's own
	}
	portalNS, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", p.cmd.Process.Pid))
	var pids []int
	for _, pid := range procsOfUID(uid) {
		ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid))
		if err != nil || ns == portalNS {
			continue
		}
		if _, err := os.Stat(fmt.Sprintf("/proc/%d/root/home/%s", pid, member)); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

func attackFromInside(t *testing.T, p *Portal, nproc int) {
	var a, b desktop
	if code := p.API(t, "alice", "POST", "/api/vdi/pools/local/demo/claim", &a); code != 200 || a.Power != "running" {
		t.Fatalf("alice's claim: %d %+v", code, a)
	}
	if code := p.API(t, "bob", "POST", "/api/vdi/pools/local/demo/claim", &b); code != 200 || b.Power != "running" {
		t.Fatalf("bob's claim: %d %+v", code, b)
	}
	bobTerm := openTerminal(t, p, "bob", b.Name)
	bobTerm.run("echo bob-secret > ~/secret.txt", 10*time.Second)

	term := openTerminal(t, p, "alice", a.Name)
	uid := desktopShellUID(t, p, term)
	// At least Xvnc, openbox and the shell (xterm and the RDP server too,
	// once started), so that the descriptor check below is not vacuous.
	var procs []int
	if !eventually(15*time.Second, func() bool { procs = desktopProcs(p, uid, a.Name); return len(procs) >= 3 }) {
		t.Fatalf("found %d processes of alice's desktop: %v", len(procs), procs)
	}
	u, _ := url.Parse(p.URL)
	attacks := desktopAttacks(p.DataDir, b.Name, u.Port(), p.cmd.Process.Pid, nproc)
	controlDesktopAttacks(t, attacks, t.TempDir())
	for _, at := range attacks {
		out := term.run(at.script, 90*time.Second)
		result := desktopAttackResult(at.name, out)
		switch {
		case result == nil:
			t.Errorf("attack %s: no result in %q", at.name, out)
		case result[1] == "SUCCESS":
			t.Errorf("attack %s SUCCEEDED from inside a desktop", at.name)
		default:
			t.Logf("attack %s: %s", at.name, result[1])
		}
	}
	// No process of alice's desktop holds a file of the portal's: every
	// descriptor into the data dir is in her own member folder.
	own := filepath.Join(p.DataDir, "local", "members", a.Name) + "/"
	// (The process-limit attack may have cost alice's own desktop a
	// process or two: those that could not fork or make a thread.)
	for _, pid := range desktopProcs(p, uid, a.Name) {
		fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
		for _, fd := range fds {
			target, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
			if strings.HasPrefix(target, p.DataDir+"/") && !strings.HasPrefix(target, own) {
				t.Errorf("process %d of alice's desktop holds %s (fd %s)", pid, target, fd.Name())
			}
		}
	}
	// Alice points her own VNC socket at bob's: the portal, which dials it
	// as root, must not follow.
	out := term.run("ln -sf "+p.DataDir+"/local/members/"+b.Name+"/run/vnc.sock $(dirname $XAUTHORITY)/vnc.sock && echo LINKED-$((6*7))", 10*time.Second)
	if !strings.Contains(out, "LINKED-42") {
		t.Fatalf("could not replace alice's socket: %q", out)
	}
	if ws, res, err := dialWS(p, "alice", "/ws/vnc/local/"+a.Name, p.URL); err == nil {
		ws.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, msg, err := ws.ReadMessage(); err == nil && strings.HasPrefix(string(msg), "RFB ") {
			t.Errorf("attack vnc-socket-symlink SUCCEEDED: alice's console reached bob's display (%q)", msg)
		}
		ws.Close()
	} else {
		t.Logf("attack vnc-socket-symlink: refused (%v)", status(res))
	}
	// Bob's own console still answers.
	ws, res, err := dialWS(p, "bob", "/ws/vnc/local/"+b.Name, p.URL)
	if err != nil {
		t.Fatalf("bob's VNC console: %v (%v)", err, status(res))
	}
	ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, msg, err := ws.ReadMessage(); err != nil || !strings.HasPrefix(string(msg), "RFB ") {
		t.Errorf("bob's VNC console said %q, %v; want the RFB greeting", msg, err)
	}
	ws.Close()
	// The portal is unharmed and nobody became admin.
	if code := p.API(t, "bob", "GET", "/api/vdi/desktops/local/"+b.Name, &b); code != 200 || b.Power != "running" {
		t.Errorf("after the attacks bob's desktop: %d %+v; want running", code, b)
	}
	if strings.Contains(p.Log(), `login=admin`) {
		t.Errorf("the portal logged an admin identity:\n%s", p.Log())
	}
	blindForgedLoop(t, p, term, u.Port(), b.Name) // last: its control releases bob's desktop
}

// blindForgedLoop is the first attack from alice's terminal: a
// forged admin header sent to the portal's loopback port and the socket
// closed at once, again and again, asking to release bob's desktop, end
// his sessions and open pool demo to mallory. Nothing may change.
func blindForgedLoop(t *testing.T, p *Portal, term *terminal, port, bobs string) {
	t.Helper()
	host := "127.0.0.1:" + port
	// wait reads each answer before closing: the control's way.
	script := func(rounds int, wait string) string {
		var b strings.Builder
		fmt.Fprintf(&b, "sent=0; for i in $(seq %d); do ", rounds)
		for _, r := range []forgedRequest{
			{"POST", "/api/vdi/desktops/local/" + bobs + "/release", ""},
			{"POST", "/api/vdi/users/bob/end-sessions", ""},
			{"PATCH", "/api/vdi/pools/local/demo", `{"access":{"users":["mallory"]}}`},
		} {
			fmt.Fprintf(&b, "exec 3<>/dev/tcp/%s 2>/dev/null && printf '%%s' %s >&3 && sent=$((sent+1)) %s; exec 3>&-; ",
				strings.Replace(host, ":", "/", 1), shellQuote(r.raw(host, "admin")), wait)
		}
		b.WriteString("done; echo BLIND-SENT-$sent")
		return b.String()
	}
	out := term.run(script(40, ""), 60*time.Second)
	var d desktop
	if code := p.API(t, "bob", "GET", "/api/vdi/desktops/local/"+bobs, &d); code != 200 || d.Holder != "bob" || d.Power != "running" {
		t.Errorf("attack forged-header-send-and-close SUCCEEDED: bob's desktop is %d %+v after it (%s)", code, d, out)
	}
	var pools []struct {
		Name string `json:"name"`
	}
	p.API(t, "alice", "GET", "/api/vdi/pools", &pools)
	if len(pools) == 0 {
		t.Errorf("attack forged-header-send-and-close SUCCEEDED: pool demo is no longer alice's to see (%s)", out)
	}
	t.Logf("attack forged-header-send-and-close: nothing changed (%s)", regexp.MustCompile(`BLIND-SENT-\d+`).FindString(out))
	// Control: the same requests from the host as root (a trusted local
	// user), each answer read before the close (a blind one fails closed
	// even for root), release bob's desktop, so the check above can tell.
	ctl, err := exec.Command("bash", "-c", script(1, "&& head -1 <&3")).CombinedOutput()
	if err != nil {
		t.Fatalf("control of forged-header-send-and-close: %v: %s", err, ctl)
	}
	if !eventually(10*time.Second, func() bool {
		d = desktop{}
		return p.API(t, "bob", "GET", "/api/vdi/desktops/local/"+bobs, &d) != 200 || d.Holder != "bob"
	}) {
		t.Errorf("control: the blind loop as root on the host left bob's desktop %+v; want it released (the script cannot tell success): %s", d, ctl)
	}
}

// uidOf returns the uid a process runs as.
func uidOf(pid int) int {
	var st syscall.Stat_t
	if err := syscall.Stat("/proc/"+strconv.Itoa(pid), &st); err != nil {
		return -1
	}
	return int(st.Uid)
}

// procsOfUID counts the live processes of uid.
func procsOfUID(uid int) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "status"))
		if err != nil || strings.Contains(string(b), "State:\tZ") {
			continue
		}
		if uidOf(pid) == uid {
			pids = append(pids, pid)
		}
	}
	return pids
}

// TestAttack_ReleaseLeavesNothing releases an ephemeral desktop whose user
// left a setsid process and files in /tmp and home: its uid has no process
// left and its files are gone before the member goes to the next user.
// It runs with the portal as root and as nobody.
func TestAttack_ReleaseLeavesNothing(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the test starts portals as root and as nobody")
	}
	t.Run("root", func(t *testing.T) { releaseLeavesNothing(t, MustStartPortal(t, "CORRAL_VDI_DEMO_POOL_SIZE=1")) })
	t.Run("nobody", func(t *testing.T) { releaseLeavesNothing(t, MustStartPortalAsNobody(t, "CORRAL_VDI_DEMO_POOL_SIZE=1")) })
}

func releaseLeavesNothing(t *testing.T, p *Portal) {
	var a desktop
	if code := p.API(t, "alice", "POST", "/api/vdi/pools/local/demo/claim", &a); code != 200 {
		t.Fatalf("claim: %d %+v", code, a)
	}
	term := openTerminal(t, p, "alice", a.Name)
	out := term.run("setsid sleep 1000 </dev/null >/dev/null 2>&1 & nohup sleep 1001 >/dev/null 2>&1 & touch /tmp/left-by-$(id -u) ~/left-in-home; echo UID=$(id -u)", 10*time.Second)
	m := regexp.MustCompile(`UID=(\d+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no uid in %q", out)
	}
	uid, _ := strconv.Atoi(m[1])
	time.Sleep(300 * time.Millisecond)
	if n := len(desktopProcs(p, uid, a.Name)); n < 3 {
		t.Fatalf("%d processes of uid %d before release; want the desktop's and the leftovers", n, uid)
	}
	term.ws.Close()
	if code := p.API(t, "alice", "POST", "/api/vdi/desktops/local/"+a.Name+"/release", nil); code != 200 && code != 204 {
		t.Fatalf("release: %d", code)
	}
	deadline := time.Now().Add(20 * time.Second)
	for len(desktopProcs(p, uid, a.Name)) > 0 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if left := desktopProcs(p, uid, a.Name); len(left) > 0 {
		t.Errorf("after release, uid %d still runs %v", uid, left)
	}
	// The host's /tmp (a uid of its own) or the member's (namespaces).
	for _, tmp := range []string{"/tmp", filepath.Join(p.DataDir, "local", "members", a.Name, "tmp")} {
		if _, err := os.Stat(filepath.Join(tmp, fmt.Sprintf("left-by-%d", uid))); err == nil {
			t.Errorf("the user's /tmp file survived the release in %s", tmp)
		}
	}
	if _, err := os.Stat(filepath.Join(p.homeOf(a.Name), "left-in-home")); err == nil {
		t.Error("the user's home file survived the release")
	}
	// The next user gets the same member, fresh, under the same uid.
	var b desktop
	if code := p.API(t, "bob", "POST", "/api/vdi/pools/local/demo/claim", &b); code != 200 || b.Name != a.Name {
		t.Fatalf("bob's claim: %d %+v; want %s", code, b, a.Name)
	}
	out = openTerminal(t, p, "bob", b.Name).run("ls -A ~ | wc -l; echo UID=$(id -u)", 10*time.Second)
	if !strings.Contains(out, "UID="+m[1]) {
		t.Errorf("bob's shell: %q; want uid %d again", out, uid)
	}
}
