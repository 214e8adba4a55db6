package e2e

import (
	"context"
	"fmt"
	"image"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/mxschmitt/playwright-go"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
)

// TestKube_SplitOnQEMU is the split of a KubeVirt VM's one display
// across two browser windows (#57) on a real QEMU: the KubeVirt
// stand-in runs the VM, whose template asks for a virtio video device,
// as QEMU with KubeVirt's display (one virtio-vga head, one VNC server,
// behind the vnc subresource) booting the tiny image, booted before the
// console opens so that its driver's framebuffer is 1280x800. Two
// 600x700 windows ask for one screen of both together, within that
// framebuffer: the guest takes it (QEMU's screendump says so), and each
// window's canvas is its part of the screendump, pixel for pixel, with
// a pattern drawn over the whole screen (from the serial console) so
// that the parts differ. Then screen 2's window grows to 1000 wide, more
// than the framebuffer: QEMU passes the size on, the guest sets what it
// can, and by the page's rule each window shows all of the desktop,
// scaled, which is again the screendump. Back at 600 wide, each window
// shows its part again. Last, two rows of the keyboard table and a
// shortcut are typed into the guest with its layout set to theirs.
func TestKube_SplitOnQEMU(t *testing.T) {
	vmImage(t) // the stand-in boots this checkout's image
	e := startKubeEnv(t)
	p := e.portal
	golden := testcluster.StoppedVM(t, e.admin, e.ns, "golden", nil)
	must(t, testcluster.Update(context.Background(), e.admin, golden, func(vm *kubevirtv1.VirtualMachine) {
		vm.Spec.Template = &kubevirtv1.VirtualMachineInstanceTemplateSpec{Spec: kubevirtv1.VirtualMachineInstanceSpec{
			Domain: kubevirtv1.DomainSpec{Devices: kubevirtv1.Devices{Video: &kubevirtv1.VideoDevice{Type: kubevirtv1.VirtIO}}}}}
	}))
	body := fmt.Sprintf(`{"namespace":%q,"name":"qemu","kind":"vm","mode":"persistent","source":"golden","size":1}`, e.ns)
	var perr apiError
	if code := p.CreatePool(t, "ops", body, &perr); code != 201 {
		t.Fatalf("create pool: %d %+v", code, perr)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the portal's log:\n%s", p.Log())
		}
	})
	d := p.claimRunning(t, "alice", e.ns, "qemu")
	vm := d.Name
	dump := func() image.Image {
		t.Helper()
		img, err := e.standIn.Screendump(e.ns, vm)
		must(t, err)
		return img
	}
	// Booted: the guest's driver has made its framebuffer (QEMU shows
	// the VGA text screen, 720x400, before), and its serial login answers.
	var size image.Point
	if !eventually(4*time.Minute, func() bool {
		size = dump().Bounds().Size()
		return size == image.Pt(1280, 800)
	}) {
		t.Fatalf("%s's display is %v after 4 minutes; want the guest's 1280x800 framebuffer", vm, size)
	}
	shell := qemuSerial(t, e, vm)
	defer shell.Close()

	b := MustLaunchBrowser(t)
	page := b.MustNewPage(t, 1280, 800)
	signIn(t, page, p, "alice", "/desktops/"+e.ns+"/"+vm+"?protocol=vnc")
	expect := playwright.NewPlaywrightAssertions(testwait.MS(60000))
	must(t, expect.Locator(page.GetByTestId("status")).ToHaveText("Connected"))
	guestAt(t, dump, "the console's window", func() image.Point { return image.Pt(wholeSize(t, page)) })

	second := addScreen(t, page, 600, 700)
	must(t, page.SetViewportSize(600, 700))
	var w1, h1, w2, h2 int
	together := func() image.Point {
		w1, h1 = wholeSize(t, page)
		w2, h2 = wholeSize(t, second)
		return image.Pt(w1+w2, max(h1, h2))
	}
	guestAt(t, dump, "both windows together", together)
	whole := together()
	shown(t, page, whole.X, whole.Y)
	shown(t, second, whole.X, whole.Y)
	// A pattern over the whole screen, so that each part is its own.
	shell.run(qemuPattern, 2*time.Minute)

	t.Run("EachWindowItsPart", func(t *testing.T) {
		showsPart(t, page, "the console's window", dump, image.Pt(0, 0), image.Pt(w1, h1))
		showsPart(t, second, "screen 2's window", dump, image.Pt(w1, 0), image.Pt(w2, h2))
		screenshot(t, page, "qemu-split-1")
		screenshot(t, second, "qemu-split-2")
	})

	t.Run("TooWideShowsAllScaled", func(t *testing.T) {
		must(t, second.SetViewportSize(1000, 700))
		asked := together()
		if asked.X <= 1280 {
			t.Fatalf("the windows together are %v; want wider than the guest's 1280 px framebuffer", asked)
		}
		showsAll(t, page, "the console's window", dump, asked)
		showsAll(t, second, "screen 2's window", dump, asked)
		must(t, expect.Locator(second.GetByTestId("screen-badge")).ToHaveText("Screen 2: all of the desktop"))
		openControl(t, page, "size-menu")
		must(t, expect.Locator(page.GetByTestId("size-note")).ToContainText(fmt.Sprintf("not %d×%d, your 2 windows together", asked.X, asked.Y)))
		closeSizeList(t, page)
		screenshot(t, page, "qemu-whole-1")
		screenshot(t, second, "qemu-whole-2")
	})

	t.Run("BackToTheParts", func(t *testing.T) {
		must(t, second.SetViewportSize(600, 700))
		guestAt(t, dump, "both windows together again", together)
		must(t, expect.Locator(second.GetByTestId("screen-badge")).ToHaveText("Screen 2"))
		showsPart(t, page, "the console's window", dump, image.Pt(0, 0), image.Pt(w1, h1))
		showsPart(t, second, "screen 2's window", dump, image.Pt(w1, 0), image.Pt(w2, h2))
	})

	t.Run("KeysInTheGuestsLayout", func(t *testing.T) {
		// The keyboard table through the kube backend's VNC (the vnc
		// subresource, the hub, QEMU's Extended Key Event), as on a local
		// VM (TestComfort_SerialPasteAsKeys): the guest's layout set with
		// its loadkeys, each row typed on a virtual terminal of its own and
		// read back over the serial console. Two rows and one shortcut:
		// this boot is the test's only one.
		vmd := &vmDesk{serial: shell}
		typeLayouts(t, page, vmd, "German AltGr", "French AZERTY, dead ^")
		typeShortcuts(t, page, vmd, "French AZERTY")
		screenshot(t, page, "kube-qemu-keys")
	})
}

// qemuPattern paints the guest's text console (tty1, the display) with
// blocks of 4 characters, each in one of the console's 8 background
// colours picked by a small random sequence, row by row to its last
// column, with the cursor hidden and the screen never blanked: a picture
// whose every part differs from the others.
const qemuPattern = `set -- $(stty -F /dev/tty1 size); awk -v R=$1 -v C=$2 'BEGIN { s = 7; printf "\033[?25l\033[9;0]"; ` +
	`for (r = 1; r <= R; r++) { printf "\033[%d;1H", r; for (c = 0; c < C; c += 4) { s = (s * 75 + 74) % 65537; ` +
	`printf "\033[4%dm%s", s % 8, substr("    ", 1, C - c < 4 ? C - c : 4) } } printf "\033[0m" }' >/dev/tty1`

// guestAt waits until the guest's display, by QEMU's screendump, is
// the size want returns: the guest has taken what the console asked.
func guestAt(t *testing.T, dump func() image.Image, what string, want func() image.Point) {
	t.Helper()
	var got, w image.Point
	if !eventually(time.Minute, func() bool {
		got, w = dump().Bounds().Size(), want()
		return got == w
	}) {
		t.Fatalf("the guest's display is %v after a minute; want %v, %s", got, w, what)
	}
}

// qemuShell is a root shell on a QEMU guest's serial console, through
// the portal's serial websocket (the console subresource).
type qemuShell struct {
	t  *testing.T
	ws *websocket.Conn
}

// qemuSerial signs in as root on vm's serial console, as alice, with the
// login the guest's user knows.
func qemuSerial(t *testing.T, e *kubeEnv, vm string) *qemuShell {
	t.Helper()
	ws, res, err := dialWS(e.portal, "alice", "/ws/serial/"+e.ns+"/"+vm, e.portal.URL)
	if err != nil {
		t.Fatalf("%s's serial console: %v (%v)", vm, err, status(res))
	}
	s := &qemuShell{t: t, ws: ws}
	user, password := e.standIn.GuestLogin(e.ns, vm)
	// login drops what was typed before its prompt: a line at a time.
	for _, step := range []struct {
		send, want string
		wait       time.Duration
	}{{"\r", "login: ", 3 * time.Minute}, {user + "\r", "Password: ", time.Minute}, {password + "\r", "# ", time.Minute}} {
		must(t, ws.WriteMessage(websocket.TextMessage, []byte(step.send)))
		readUntilWS(t, ws, step.want, step.wait)
		time.Sleep(300 * time.Millisecond)
	}
	return s
}

// run runs cmd in the shell and waits up to d for it to end.
func (s *qemuShell) run(cmd string, d time.Duration) {
	s.t.Helper()
	must(s.t, s.ws.WriteMessage(websocket.TextMessage, []byte(cmd+"; echo ran-$((6*7))\r")))
	readUntilWS(s.t, s.ws, "ran-42", d)
}

// ask types line into the shell and returns what the console printed
// that matches want (carriage returns dropped), once it does (within d).
func (s *qemuShell) ask(t *testing.T, line string, want *regexp.Regexp, d time.Duration) string {
	t.Helper()
	must(t, s.ws.WriteMessage(websocket.TextMessage, []byte(line+"\r")))
	var got strings.Builder
	s.ws.SetReadDeadline(time.Now().Add(d))
	for {
		if m := want.FindString(strings.ReplaceAll(got.String(), "\r", "")); m != "" {
			return m
		}
		_, b, err := s.ws.ReadMessage()
		if err != nil {
			t.Fatalf("read the serial console: %v; want %s in:\n%s", err, want, got.String())
		}
		got.Write(b)
	}
}

// Close ends the serial console.
func (s *qemuShell) Close() error { return s.ws.Close() }
