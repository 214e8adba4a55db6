package e2e

import (
	"net/http"
	"testing"
)

// screenAttacks are the attack table's rows on a console's screen windows
// (#57): ?screen= lets a VNC console join the desktop's screen beside the
// holder's own instead of taking it over, so only the holder may ask for
// it, for screens 2 and 3 of a VNC console only.
func screenAttacks() []attack {
	screen := func(user, path string) func(t *testing.T, a *arena) *http.Response {
		return func(t *testing.T, a *arena) *http.Response {
			return a.dialWS(t, path+a.victim+"?screen=2", "Tailscale-User-Login", user, "Origin", "http://"+a.host)
		}
	}
	return []attack{
		{
			// An admin who may watch alice's desktop asks for a screen of
			// it: a screen window is the holder's, with control.
			name:   "AdminOpensAScreenOfAnotherUsersDesktop",
			attack: screen(admin, "/ws/vnc/local/"),
			status: 403, says: "Only the desktop's holder adds screens",
		},
		{
			// The holder asks for a fourth screen, past what a console has.
			name: "HolderOpensAFourthScreen",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.dialWS(t, "/ws/vnc/local/"+a.victim+"?screen=4", "Tailscale-User-Login", "alice", "Origin", "http://"+a.host)
			},
			status: 400, says: "at most 3 screens",
		},
		{
			// A serial console takes one client: a "screen" of it would
			// be a second beside the holder's.
			name:   "HolderOpensASecondTerminalAsAScreen",
			attack: screen("alice", "/ws/terminal/local/"),
			status: 400, says: "Only VNC consoles show a desktop on more than one screen",
		},
		{
			// Her VM's display has two heads: a third is none of its
			// sockets, whatever QEMU might listen on.
			name: "HolderOpensAHeadTheVMHasNot", env: vmArena, setup: claimArenaVM,
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.dialWS(t, "/ws/vnc/local/"+a.state["vm"].(string)+"?screen=3", "Tailscale-User-Login", "alice", "Origin", "http://"+a.host)
			},
			status: 400, says: "has 2 heads, so it shows on 2 screens, not on a screen 3",
		},
		{
			// mallory asks for the second head of alice's VM.
			name: "StrangerOpensAVMsSecondHead", env: vmArena, setup: claimArenaVM,
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.dialWS(t, "/ws/vnc/local/"+a.state["vm"].(string)+"?screen=2", "Tailscale-User-Login", "mallory", "Origin", "http://"+a.host)
			},
			status: 403,
		},
	}
}

// vmArena is the settings of an arena with a local VM pool (demo-vm).
var vmArena = []string{"CORRAL_VDI_DEMO_VM_POOL_SIZE=1"}

// claimArenaVM has alice hold the arena's VM (state "vm"), once.
func claimArenaVM(t *testing.T, a *arena) {
	if _, ok := a.state["vm"]; !ok {
		vmImage(t)
		a.state["vm"] = mustClaim(t, a.p, "alice", "demo-vm").Name
	}
}
