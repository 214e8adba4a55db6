package e2e

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/internal/testrfb"
)

// The attack table's rows on a VM's screen windows (#57): a local VM's
// display has two heads, a VNC server each (QEMU's); a KubeVirt VM's one
// display is split across the windows (caps.split). Only the holder adds
// a screen, and only screens 2 and 3; whatever layout a console with
// control asks for, the screen hub hands the VM's display only one it
// could show, since QEMU's VNC server passes any width and height to the
// guest (0×0 turns its output off).

// screenRows are the rows on screen windows of the desktop path(a) names
// (/ws/vnc/ns/member), held by alice: someone else asks for a screen (an
// admin who may watch it, invitees with and without control), alice asks
// for one that is not a screen window, and a view-only invitee's layout
// reaches nothing. setup claims what the rows need; the row names end in
// of.
func screenRows(of string, env []string, setup func(*testing.T, *arena), path func(*arena) string) []attack {
	screen := func(login, n string) func(t *testing.T, a *arena) *http.Response {
		return func(t *testing.T, a *arena) *http.Response {
			return a.dialWS(t, path(a)+"?screen="+n, "Tailscale-User-Login", login, "Origin", "http://"+a.host)
		}
	}
	// invited has alice invite login (state login: the invitation).
	invited := func(login string, control bool) func(*testing.T, *arena) {
		return func(t *testing.T, a *arena) {
			setup(t, a)
			a.state[login] = a.invite(t, "alice", desktopOf(path(a)), login, control)
		}
	}
	uninvite := func(login string) func(*testing.T, *arena, *http.Response, string) {
		return func(t *testing.T, a *arena, _ *http.Response, _ string) {
			id := a.state[login].(string)
			if code := a.p.API(t, "alice", "DELETE", "/api/vdi/desktops/"+desktopOf(path(a))+"/shares/"+id, nil); code != 204 {
				t.Errorf("alice revokes %s's invitation: %d", login, code)
			}
		}
	}
	rows := []attack{
		{
			name: "AdminOpensAScreenOf" + of, env: env, setup: setup,
			attack: screen(admin, "2"),
			status: 403, says: "Only the desktop's holder adds screens",
		},
		{
			// An invitation shares the holder's screen; a screen window
			// would make the desktop larger for her.
			name: "ViewOnlyInviteeOpensAScreenOf" + of, env: env, setup: invited("carol", false),
			attack: screen("carol", "2"),
			status: 403, says: "Only the desktop's holder adds screens", after: uninvite("carol"),
		},
		{
			name: "ControlInviteeOpensAScreenOf" + of, env: env, setup: invited("dave", true),
			attack: screen("dave", "2"),
			status: 403, says: "Only the desktop's holder adds screens", after: uninvite("dave"),
		},
		{
			// A view-only invitee's SetDesktopSize (one a holder's console
			// would send) reaches nothing: not one byte after the
			// handshake gets to the desktop.
			name: "ViewOnlyInviteeResizes" + of, env: env, setup: invited("erin", false),
			attack: func(t *testing.T, a *arena) *http.Response {
				ws, res := a.console(t, "erin", path(a))
				rfbClient(t, ws, [][]byte{testrfb.SetDesktopSize(800, 600, [5]int{0, 0, 0, 800, 600})})
				return res
			},
			status: 101, consoles: 1,
			after: func(t *testing.T, a *arena, res *http.Response, body string) {
				noInputReached(t, a, "erin")
				uninvite("erin")(t, a, res, body)
			},
		},
		{
			name: "HolderOpensAFourthScreenOf" + of, env: env, setup: setup,
			attack: screen("alice", "4"),
			status: 400, says: "at most 3 screens",
		},
	}
	for _, n := range []string{"0", "1", "-1", "2x"} {
		rows = append(rows, attack{
			name: "HolderOpensScreen" + n + "Of" + of, env: env, setup: setup,
			attack: screen("alice", n),
			status: 400, says: "Screen windows are screens 2 and 3",
		})
	}
	return rows
}

// desktopOf returns the ns/member of a console websocket's path.
func desktopOf(path string) string {
	return regexp.MustCompile(`^/ws/\w+/`).ReplaceAllString(path, "")
}

// vmScreenAttacks are the rows on the screen windows of alice's local VM
// (vmArena): screenRows, and each bad layout asked of its first head (her
// console) and of its second (her screen window), which the screen hub of
// each refuses before QEMU sees it.
func vmScreenAttacks() []attack {
	vm := func(a *arena) string { return "/ws/vnc/local/" + a.state["vm"].(string) }
	rows := screenRows("AVM", vmArena, runningArenaVM, vm)
	for _, l := range badLayouts {
		for _, head := range []struct{ name, query string }{{"Console", ""}, {"ScreenWindow", "?screen=2"}} {
			rows = append(rows, attack{
				name: "HolderAsksTheVM" + l.name + "Through" + head.name, env: vmArena, setup: aliceClosed(runningArenaVM),
				attack: refusesLayout("alice", func(a *arena) string { return vm(a) + head.query }, l),
				status: 101, consoles: 1,
			})
		}
	}
	return rows
}

// runningArenaVM is claimArenaVM, then a wait until the VM runs.
func runningArenaVM(t *testing.T, a *arena) {
	claimArenaVM(t, a)
	var d desktop
	waitFor(t, 60*time.Second, "alice's VM running", func() bool {
		return a.p.API(t, "alice", "GET", "/api/vdi/desktops/local/"+a.state["vm"].(string), &d) == 200 && d.Power == "running"
	})
}

// aliceClosed is setup, then a wait until no console is open (hers are
// two at most: CORRAL_VDI_MAX_CONSOLES_PER_USER).
func aliceClosed(setup func(*testing.T, *arena)) func(*testing.T, *arena) {
	return func(t *testing.T, a *arena) {
		setup(t, a)
		waitFor(t, 20*time.Second, "the earlier rows' consoles closed", func() bool { return len(a.openSessions(t)) == 0 })
	}
}

// TestAttacks_KubeVMScreens runs screenRows on a KubeVirt VM, whose one
// display the screen windows split (the KubeVirt stand-in's guest is an
// Xvnc behind its vnc subresource), and two layouts asked through alice's
// screen window: one past what the hub holds (Xvnc would take up to 32768
// a side) and overlapping screens (Xvnc takes those too), each refused
// with the guest's display left as it was.
func TestAttacks_KubeVMScreens(t *testing.T) {
	e := startKubeEnv(t, "CORRAL_VDI_MAX_CONSOLES_PER_USER=2")
	testcluster.StoppedVM(t, e.admin, e.ns, "golden", nil)
	body := fmt.Sprintf(`{"namespace":%q,"name":"desk","kind":"vm","mode":"persistent","source":"golden","size":2}`, e.ns)
	var perr apiError
	if code := e.portal.CreatePool(t, admin, body, &perr); code != 201 {
		t.Fatalf("create pool: %d %+v", code, perr)
	}
	a := &arena{p: e.portal, host: strings.TrimPrefix(e.portal.URL, "http://"), state: map[string]any{}}
	for _, user := range []string{"alice", "mallory"} {
		var d desktop
		waitFor(t, 90*time.Second, user+"'s claim of a running VM", func() bool {
			code := e.portal.API(t, user, "POST", "/api/vdi/pools/"+e.ns+"/desk/claim", &d)
			return code == 200 && d.Power == "running"
		})
		a.state[user] = d.Name
	}
	a.victim = a.state["alice"].(string)
	vm := func(a *arena) string { return "/ws/vnc/" + e.ns + "/" + a.victim }
	dims := func(t *testing.T) string {
		out, err := e.standIn.OnGuestDisplay(e.ns, a.victim, "xdpyinfo | grep dimensions:")
		if err != nil {
			t.Fatalf("xdpyinfo on the guest's display: %v: %s", err, out)
		}
		return strings.TrimSpace(out)
	}
	rows := screenRows("AKubeVirtVM", nil, func(*testing.T, *arena) {}, vm)
	rows = append(rows, attack{
		name: "StrangerOpensAScreenOfAKubeVirtVM",
		attack: func(t *testing.T, a *arena) *http.Response {
			return a.dialWS(t, vm(a)+"?screen=2", "Tailscale-User-Login", "mallory", "Origin", "http://"+a.host)
		},
		status: 403,
	})
	for _, l := range []badLayout{badLayouts[3], badLayouts[4]} {
		rows = append(rows, attack{
			name:   "HolderAsksTheKubeVirtVM" + l.name + "ThroughScreenWindow",
			setup:  aliceClosed(func(t *testing.T, a *arena) { a.state["dims"] = dims(t) }),
			attack: refusesLayout("alice", func(a *arena) string { return vm(a) + "?screen=2" }, l),
			status: 101, consoles: 1,
			after: func(t *testing.T, a *arena, _ *http.Response, _ string) {
				if got := dims(t); got != a.state["dims"] {
					t.Errorf("the guest's display after the refusal: %s; want it as it was, %s", got, a.state["dims"])
				}
			},
		})
	}
	runAttacks(t, rows, map[string]*arena{"": a})
}
