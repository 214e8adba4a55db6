package handlers

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// TestConsoleScreen checks which console websockets may be a screen
// window: the holder's VNC console of a desktop whose server gives each
// window a screen (Xvnc), screens 2 and 3; of a local VM with two heads,
// screen 2; a VM's one-head display, a head it has not got and the rest
// are refused in words.
func TestConsoleScreen(t *testing.T) {
	xvnc := vdi.Caps{Display: true, Resize: true, Screens: true}
	vm := vdi.Caps{Display: true, Resize: true}
	heads := vdi.Caps{Display: true, Resize: true, Heads: 2}
	kubevirt := vdi.Caps{Display: true, Resize: true, Split: true}
	for _, tc := range []struct {
		name, query string
		p           vdi.Protocol
		caps        vdi.Caps
		holder      bool
		want        int
		says        string
	}{
		{"console's own window", "", vdi.ProtocolVNC, vm, true, 0, ""},
		{"second screen of a local desktop", "?screen=2", vdi.ProtocolVNC, xvnc, true, 2, ""},
		{"third screen", "?screen=3", vdi.ProtocolVNC, xvnc, true, 3, ""},
		{"a VM's one head", "?screen=2", vdi.ProtocolVNC, vm, true, 0, "display has one head"},
		{"fourth screen", "?screen=4", vdi.ProtocolVNC, xvnc, true, 0, "at most 3 screens"},
		{"screen 99999999999999999999", "?screen=99999999999999999999", vdi.ProtocolVNC, xvnc, true, 0, "Screen windows are screens 2 and 3"},
		{"screen 0", "?screen=0", vdi.ProtocolVNC, xvnc, true, 0, "Screen windows are screens 2 and 3"},
		{"screen 1, the console's own", "?screen=1", vdi.ProtocolVNC, kubevirt, true, 0, "is screen 1"},
		{"screen -2", "?screen=-2", vdi.ProtocolVNC, heads, true, 0, `not screen "-2"`},
		{"screen 2 with more", "?screen=2x", vdi.ProtocolVNC, kubevirt, true, 0, `not screen "2x"`},
		{"screen +2", "?screen=%2B2", vdi.ProtocolVNC, kubevirt, true, 0, `not screen "+2"`},
		{"a VM's second head", "?screen=2", vdi.ProtocolVNC, heads, true, 2, ""},
		{"a head the VM has not got", "?screen=3", vdi.ProtocolVNC, heads, true, 0, "has 2 heads, so it shows on 2 screens, not on a screen 3"},
		{"a VM's fourth screen", "?screen=4", vdi.ProtocolVNC, heads, true, 0, "at most 3 screens"},
		{"a viewer of a VM's head", "?screen=2", vdi.ProtocolVNC, heads, false, 0, "Only the desktop's holder adds screens"},
		{"a KubeVirt VM's second window", "?screen=2", vdi.ProtocolVNC, kubevirt, true, 2, ""},
		{"a KubeVirt VM's third window", "?screen=3", vdi.ProtocolVNC, kubevirt, true, 3, ""},
		{"a KubeVirt VM's fourth window", "?screen=4", vdi.ProtocolVNC, kubevirt, true, 0, "at most 3 screens"},
		{"a viewer of a KubeVirt VM's window", "?screen=2", vdi.ProtocolVNC, kubevirt, false, 0, "Only the desktop's holder adds screens"},
		{"not the holder", "?screen=2", vdi.ProtocolVNC, xvnc, false, 0, "Only the desktop's holder adds screens"},
		{"a terminal", "?screen=2", vdi.ProtocolTerminal, vdi.Caps{Resize: true}, true, 0, "Only VNC consoles"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := consoleScreen(httptest.NewRequest("GET", "/ws/vnc/local/demo-1"+tc.query, nil), tc.p, tc.caps, tc.holder)
			if tc.says == "" {
				if err != nil || got != tc.want {
					t.Fatalf("consoleScreen = %d, %v; want %d", got, err, tc.want)
				}
				return
			}
			var e *vdi.Error
			if !errors.As(err, &e) || !strings.Contains(e.Error(), tc.says) {
				t.Fatalf("consoleScreen = %d, %v; want an error saying %q", got, err, tc.says)
			}
		})
	}
}
