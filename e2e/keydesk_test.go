package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	playwright "github.com/mxschmitt/playwright-go"
)

// A keyDesk is a desktop that typeLayouts and typeShortcuts type into
// through its console page.
type keyDesk interface {
	// listen makes the desktop's keyboard layout the one named (where its
	// console sends physical keys), then has the terminal that the page's
	// keys reach run read (a command reading keys from it), in raw mode if
	// raw, into the file name; it returns once read waits for keys.
	listen(t *testing.T, layout string, raw bool, read, name string)
	// holds waits until the desktop's file name holds want, byte for byte,
	// and says what it holds if not.
	holds(t *testing.T, name, want string)
}

// readLine is the shell line that runs read into dir/name, first
// touching dir/name.go to say it is about to wait for keys; raw around
// it where asked (keys typed before the terminal is raw would be
// signals).
func readLine(dir string, raw bool, read, name string) string {
	line := fmt.Sprintf("touch %[1]s/%[2]s.go; %[3]s > %[1]s/%[2]s", dir, name, read)
	if raw {
		line = "stty raw -echo; " + line + "; stty sane"
	}
	return line
}

// xDesk is a local desktop (an X server, Xvnc) and its VNC or RDP
// console page; shell runs commands in it, home is its home folder here.
type xDesk struct {
	page  playwright.Page
	shell *guestShell
	home  string
	// scanCodes: the console sends physical keys (RDP), which the X
	// server's layout makes characters of; VNC sends keysyms, which Xvnc
	// types whatever its layout.
	scanCodes bool
}

// listen types the command with Type as keys, the desktop's layout and
// the Keys list's English (US): Xvnc types a character its keymap lacks
// by giving it a spare key, and TigerVNC 1.12 has about twenty, which
// setxkbmap (the switch docs/consoles.md names) gives back. On RDP the
// desktop's layout then becomes the row's, once the command runs (the
// X server makes characters of the keys it gets with the layout it has
// then).
func (d xDesk) listen(t *testing.T, layout string, raw bool, read, name string) {
	t.Helper()
	d.shell.run("setxkbmap us")
	pasteAsKeys(t, d.page, readLine("$HOME", raw, read, name)+"\n")
	if !eventually(30*time.Second, func() bool { _, err := os.Stat(filepath.Join(d.home, name+".go")); return err == nil }) {
		t.Fatalf("the desktop's terminal did not run %q", readLine("$HOME", raw, read, name))
	}
	if d.scanCodes {
		d.shell.run("setxkbmap " + setxkbmapArgs(layout))
	}
}

func (d xDesk) holds(t *testing.T, name, want string) {
	t.Helper()
	waitFile(t, filepath.Join(d.home, name), want)
}

// setxkbmapArgs is setxkbmap's arguments for a layout of keyboardLayouts:
// us-intl is us with the intl variant.
func setxkbmapArgs(layout string) string {
	if l, v, ok := strings.Cut(layout, "-"); ok {
		return "-layout " + l + " -variant " + v
	}
	return layout
}

// vmDesk is a VM booting the tiny image of scripts/vm-image.sh (local, or
// KubeVirt's) and its VNC console page: keys reach the guest as physical
// keys (QEMU's Extended Key Event) and its console's layout makes the
// characters. serial is a root shell on its serial console: the commands
// go there, and files are read back there.
type vmDesk struct {
	serial vmSerial
	vt     int // the last virtual terminal listen took
}

// A vmSerial is a root shell on a VM's serial console: ask types line
// and returns what the console shows that matches want, once it does
// (within d).
type vmSerial interface {
	ask(t *testing.T, line string, want *regexp.Regexp, d time.Duration) string
}

// xtermSerial is a serial console's page, logged in as root.
type xtermSerial struct{ page playwright.Page }

func (s xtermSerial) ask(t *testing.T, line string, want *regexp.Regexp, d time.Duration) string {
	t.Helper()
	enterXterm(t, s.page, line)
	return waitXterm(t, s.page, want, d)
}

// listen sets the guest's layout with its loadkeys and runs the command
// on a virtual terminal of its own (from 3 on: a reader a failed row left
// waiting takes no keys of the next), which it brings to the screen (the
// VNC console's).
func (d *vmDesk) listen(t *testing.T, layout string, raw bool, read, name string) {
	t.Helper()
	d.vt = max(d.vt+1, 3)
	d.serial.ask(t, fmt.Sprintf("loadkeys %s && openvt -c %d -s -- sh -c '%s'; "+
		"for i in $(seq 150); do [ -e /tmp/%[4]s.go ] && break; sleep 0.2; done; [ -e /tmp/%[4]s.go ] && echo listening-%[4]s-$((6*7))",
		layout, d.vt, readLine("/tmp", raw, read, name), name),
		regexp.MustCompile(`(?m)^listening-`+regexp.QuoteMeta(name)+`-42$`), 60*time.Second)
}

// holds reads the file over the serial console as od prints it, once it
// is not empty (or after 30 s).
func (d *vmDesk) holds(t *testing.T, name, want string) {
	t.Helper()
	shown := d.serial.ask(t, fmt.Sprintf("for i in $(seq 150); do [ -s /tmp/%[1]s ] && break; sleep 0.2; done; "+
		"od -An -v -tx1 /tmp/%[1]s; echo od-%[1]s-$((6*7))", name),
		regexp.MustCompile(`(?m)(?:^(?: [0-9a-f]{2})+\n)*^od-`+regexp.QuoteMeta(name)+`-42$`), 60*time.Second)
	var got []byte
	for _, h := range strings.Fields(shown[:strings.LastIndex(shown, "od-")]) {
		b, err := strconv.ParseUint(h, 16, 8)
		must(t, err)
		got = append(got, byte(b))
	}
	if string(got) != want {
		t.Errorf("the guest's %s holds %q; want %q", name, got, want)
	}
}
