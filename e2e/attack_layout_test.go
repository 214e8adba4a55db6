package e2e

import (
	be "encoding/binary"
	"net/http"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/corral-dev/corral-vdi-portal/internal/testrfb"
)

// What the attack rows on screen layouts send a console (a SetDesktopSize
// of the attacker's making) and how they read the answer.

// badLayout is a layout no VM's display should be handed.
type badLayout struct {
	name string
	msg  []byte
}

// badLayouts are what an attacker with control asks a VM's display for:
// QEMU's VNC server hands the guest any width and height it is sent.
var badLayouts = []badLayout{
	{"ItsDisplayOff", testrfb.SetDesktopSize(0, 0, [5]int{0, 0, 0, 0, 0})},
	{"NoScreen", testrfb.SetDesktopSize(800, 600)},
	{"AScreenAtANegativePlace", testrfb.SetDesktopSize(800, 600, [5]int{0, -200, -100, 800, 600})},
	{"OverlappingScreens", testrfb.SetDesktopSize(1600, 600, [5]int{0, 0, 0, 1000, 600}, [5]int{1, 600, 0, 1000, 600})},
	{"MoreThanTheHubHolds", testrfb.SetDesktopSize(20000, 600, [5]int{0, 0, 0, 20000, 600})},
}

// statusInvalidLayout is ExtendedDesktopSize's answer to a layout the
// server (or the portal's screen hub before it) cannot take.
const statusInvalidLayout = 3

// layoutAnswer shakes hands on a console websocket, asks for the layout
// in msg (a SetDesktopSize) as a client that follows ExtendedDesktopSize,
// and returns the answer's status (0 taken, 1 prohibited, 3 invalid
// layout, 4 passed to the guest) and the desktop's size it names.
func layoutAnswer(t *testing.T, ws *websocket.Conn, msg []byte) (status, w, h int) {
	t.Helper()
	v := newRFBViewer(t, ws)
	v.send(t, []byte{2, 0, 0, 1, 0xff, 0xff, 0xfe, 0xcc}) // SetEncodings: ExtendedDesktopSize only, and no update asked
	v.send(t, msg)
	v.deadline = time.Now().Add(20 * time.Second)
	read := func(n int) []byte {
		b, err := v.read(n)
		if err != nil {
			t.Fatalf("waiting for the answer to a SetDesktopSize: %v", err)
		}
		return b
	}
	for {
		switch typ := read(1)[0]; typ {
		case 0: // FramebufferUpdate
			for range be.BigEndian.Uint16(read(3)[1:]) {
				r := read(12)
				x, y := int(be.BigEndian.Uint16(r[0:])), int(be.BigEndian.Uint16(r[2:]))
				rw, rh := int(be.BigEndian.Uint16(r[4:])), int(be.BigEndian.Uint16(r[6:]))
				switch enc := int32(be.BigEndian.Uint32(r[8:])); enc {
				case -308: // ExtendedDesktopSize: x is the reason, y the status
					read(16 * int(read(4)[0]))
					if x == 1 {
						return y, rw, rh
					}
				case -223: // DesktopSize
				default:
					t.Fatalf("a rectangle in encoding %d; the client asked for none but ExtendedDesktopSize", enc)
				}
			}
		case 2: // Bell
		case 3: // ServerCutText
			read(int(be.BigEndian.Uint32(read(7)[3:])))
		default:
			t.Fatalf("server message type %d while waiting for the answer to a SetDesktopSize", typ)
		}
	}
}

// refusesLayout is a row's attack: login opens the console websocket at
// path(a) and asks for l; the portal must answer 3, invalid layout,
// and hand the desktop nothing.
func refusesLayout(login string, path func(*arena) string, l badLayout) func(t *testing.T, a *arena) *http.Response {
	return func(t *testing.T, a *arena) *http.Response {
		ws, res := a.console(t, login, path(a))
		if status, w, h := layoutAnswer(t, ws, l.msg); status != statusInvalidLayout {
			t.Errorf("%s asked for %x: answered status %d (desktop %dx%d); want %d, refused by the portal's screen hub", login, l.msg, status, w, h, statusInvalidLayout)
		}
		return res
	}
}
