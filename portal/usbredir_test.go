package portal

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/corral-dev/corral-vdi-portal/api"
	"github.com/corral-dev/corral-vdi-portal/cli"
	"github.com/corral-dev/corral-vdi-portal/internal/testvm"
	"github.com/corral-dev/corral-vdi-portal/local"
	"github.com/corral-dev/corral-vdi-portal/relay"
)

// usbCommandRE finds the console page's usb redir command.
var usbCommandRE = regexp.MustCompile(`data-testid="usb-command">corral-vdi-portal usb redir --portal (\S+) (\S+) --device VID:PID --token (\S+)</pre>`)

// fakeUSBRedirectEnv makes the test binary act as Debian's usbredirect
// (the usbredir "host" side) for `usb redir`: there is no USB device on a
// test machine for the real one to open. It connects to --to, sends its
// usb_redir_hello, reads the guest's and prints it.
const fakeUSBRedirectEnv = "CORRAL_FAKE_USBREDIRECT"

func init() {
	if os.Getenv(fakeUSBRedirectEnv) != "1" {
		return
	}
	var to, device string
	for i := 1; i+1 < len(os.Args); i++ {
		switch os.Args[i] {
		case "--to":
			to = os.Args[i+1]
		case "--device":
			device = os.Args[i+1]
		}
	}
	c, err := net.Dial("tcp", to)
	if err != nil {
		fmt.Println("fake usbredirect:", err)
		os.Exit(3)
	}
	c.Write(relay.USBRedirHello("fake usbredirect "+device, 0))
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	v, _, err := relay.ReadUSBRedirHello(c)
	if err != nil {
		fmt.Println("fake usbredirect:", err)
		os.Exit(4)
	}
	fmt.Printf("guest hello: %s\n", v)
	os.Exit(0)
}

// mustFakeOnPath puts the test binary on PATH as name, acting as the
// program env names.
func mustFakeOnPath(t *testing.T, name string, env ...string) string {
	t.Helper()
	bin := copyTestBinary(t)
	fake := filepath.Join(filepath.Dir(bin), name)
	if err := os.Rename(bin, fake); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", filepath.Dir(fake)+string(os.PathListSeparator)+os.Getenv("PATH"))
	for i := 0; i+1 < len(env); i += 2 {
		t.Setenv(env[i], env[i+1])
	}
	return fake
}

// dialUSB opens /ws/usbredir of desktop with header h.
func dialUSB(base, desktop string, h http.Header) (*websocket.Conn, *http.Response, error) {
	return websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(base, "http")+"/ws/usbredir/"+desktop, h)
}

// mustRefuse fails t unless the websocket to desktop is refused with
// status before the upgrade, with says in the portal's message.
func mustRefuse(t *testing.T, base, desktop string, h http.Header, status int, says string) {
	t.Helper()
	ws, res, err := dialUSB(base, desktop, h)
	if err == nil {
		ws.Close()
		t.Fatalf("usbredir of %s with %v: upgraded; want %d", desktop, h, status)
	}
	if res == nil {
		t.Fatalf("usbredir of %s: %v; want an HTTP refusal", desktop, err)
	}
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != status || !strings.Contains(string(body), says) {
		t.Fatalf("usbredir of %s with %v: %d %s; want %d saying %q", desktop, h, res.StatusCode, body, status, says)
	}
}

// mustHandshake sends a usb_redir_hello on ws and returns the guest's.
func mustHandshake(t *testing.T, ws *websocket.Conn) string {
	t.Helper()
	if err := ws.WriteMessage(websocket.BinaryMessage, relay.USBRedirHello("corral test client", 0)); err != nil {
		t.Fatal(err)
	}
	ws.SetReadDeadline(time.Now().Add(20 * time.Second))
	var got bytes.Buffer
	for got.Len() < 12+64 {
		_, msg, err := ws.ReadMessage()
		if err != nil {
			t.Fatalf("reading the guest's hello: %v (have %d bytes)", err, got.Len())
		}
		got.Write(msg)
	}
	v, _, err := relay.ReadUSBRedirHello(&got)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestUSBRedir_LocalQEMU attaches through /ws/usbredir to a real QEMU
// member's usb-redir chardev: both sides' usb_redir_hello pass end to end,
// for a Go client and for `usb redir --portal` bridging usbredirect (a
// stand-in for the real one, which needs a device). Non-holders,
// cross-origin pages, a second stream and a session desktop are refused
// before the upgrade; attach and detach are audited.
func TestUSBRedir_LocalQEMU(t *testing.T) {
	img, err := testvm.Image() // this checkout's, not the cache's current
	if err != nil {
		t.Fatal(err) // the build's own failure: skipping would hide it
	}
	p := mustStartCLIPortal(t, "CORRAL_VDI_DEMO_VM_POOL_SIZE", "1", "CORRAL_VDI_VM_IMAGE", img)
	base := p.m.URL()
	p.mustCLI(t, "pool", "create", "usbct", "--size", "1")
	for _, pool := range []string{local.DemoVMPool, "usbct"} {
		if code, body := p.api(t, "alice", "POST", "/api/vdi/pools/local/"+pool+"/claim", ""); code != http.StatusOK {
			t.Fatalf("claim %s: %d %s", pool, code, body)
		}
	}
	vm := "local/" + local.DemoVMPool + "-1"
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(300 * time.Millisecond) {
		_, body := p.api(t, "alice", "GET", "/api/vdi/desktops/"+vm, "")
		if strings.Contains(body, `"power":"running"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never ran: %s", vm, body)
		}
	}
	alice := http.Header{"Tailscale-User-Login": {"alice"}, "Origin": {base}}

	t.Run("NonHolderRefusedBeforeUpgrade", func(t *testing.T) {
		mustRefuse(t, base, vm, http.Header{"Tailscale-User-Login": {"bob"}}, http.StatusForbidden, "")
	})
	t.Run("CrossOriginRefused", func(t *testing.T) {
		mustRefuse(t, base, vm, http.Header{"Tailscale-User-Login": {"alice"}, "Origin": {"http://evil.example"}}, http.StatusForbidden, "")
	})
	t.Run("SessionDesktopNotSupported", func(t *testing.T) {
		mustRefuse(t, base, "local/usbct-1", alice, http.StatusBadRequest, "Not supported: USB needs a KubeVirt or QEMU VM")
	})
	t.Run("HandshakeEndToEnd", func(t *testing.T) {
		ws, _, err := dialUSB(base, vm, alice)
		if err != nil {
			t.Fatal(err)
		}
		if v := mustHandshake(t, ws); !strings.HasPrefix(v, "qemu usb-redir guest") {
			t.Fatalf("guest hello %q; want QEMU's", v)
		}
		mustRefuse(t, base, vm, alice, http.StatusConflict, "one device stream at a time")
		ws.Close()
	})
	t.Run("CLIBridgesUSBRedirect", func(t *testing.T) {
		mustFakeOnPath(t, "usbredirect", fakeUSBRedirectEnv, "1")
		// The console page shows the command, with its token, to the holder.
		_, page := p.api(t, "alice", "GET", "/desktops/"+vm, "")
		m := usbCommandRE.FindStringSubmatch(page)
		if m == nil || m[1] != base || m[2] != vm {
			t.Fatalf("console page of %s shows no usb redir command for %s:\n%s", vm, base, page)
		}
		tok := m[3]
		if _, page := p.api(t, "alice", "GET", "/desktops/local/usbct-1", ""); strings.Contains(page, "usb-hint") {
			t.Fatal("a session desktop's page offers USB")
		}
		var out, errOut bytes.Buffer
		e := cli.Env{Getenv: func(string) string { return "" }, Out: &out, ErrOut: &errOut}
		var err error
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			out.Reset()
			errOut.Reset()
			// The previous stream's end reaches the portal a moment later.
			err = cli.Run(context.Background(), e, "usb", []string{"redir", "--portal", base, vm, "--device", "1050:0407", "--yes", "--token", tok})
			if cli.ExitCode(err) != cli.ExitConflict || time.Now().After(deadline) {
				break
			}
		}
		if err != nil {
			t.Fatalf("usb redir: %v\n%s", err, errOut.String())
		}
		if !strings.Contains(errOut.String(), "guest hello: qemu usb-redir guest") || !strings.Contains(errOut.String(), "cannot live-migrate") {
			t.Fatalf("usb redir printed %q / %q; want the warning and QEMU's hello through usbredirect", out.String(), errOut.String())
		}
		if !strings.Contains(out.String(), "attached 1050:0407 to "+vm) {
			t.Fatalf("usb redir printed %q", out.String())
		}
		err = cli.Run(context.Background(), e, "usb", []string{"redir", "--portal", base, vm, "--device", "1050:0407", "--yes", "--token", "forged.token"})
		if cli.ExitCode(err) != cli.ExitRefused || !strings.Contains(err.Error(), "not valid") {
			t.Fatalf("usb redir with a forged token: %v; want refused", err)
		}
	})
	t.Run("Audited", func(t *testing.T) {
		var rows []api.AuditEntry
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			if err := json.Unmarshal([]byte(p.mustCLI(t, "audit", "-json", "-user", "alice")), &rows); err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, r := range rows {
				if r.Target == local.DemoVMPool+"-1" && (r.Action == "usb-attach" || r.Action == "usb-detach") {
					n++
				}
			}
			if n >= 4 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("audit of alice has %d USB attach/detach rows; want 4: %+v", n, rows)
			}
		}
	})
	t.Run("ReleaseDetaches", func(t *testing.T) {
		var ws *websocket.Conn
		var err error
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			if ws, _, err = dialUSB(base, vm, alice); err == nil || time.Now().After(deadline) {
				break // the earlier streams' ends reach the portal a moment later
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		defer ws.Close()
		mustHandshake(t, ws)
		p.mustCLI(t, "release", vm, "-reason", "maintenance")
		ws.SetReadDeadline(time.Now().Add(15 * time.Second))
		for {
			if _, _, err := ws.ReadMessage(); err != nil {
				if strings.Contains(err.Error(), "timeout") {
					t.Fatalf("the USB stream outlived the release: %v", err)
				}
				return
			}
		}
	})
}
