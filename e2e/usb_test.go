package e2e

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/relay"
)

// fakeUSBRedirectEnv makes this test binary act as Debian's usbredirect,
// the usbredir "host" side, since a test machine has no USB device for the
// real one to open: it connects to --to, sends its usb_redir_hello, and
// prints the guest's.
const fakeUSBRedirectEnv = "CORRAL_E2E_FAKE_USBREDIRECT"

func init() {
	if os.Getenv(fakeUSBRedirectEnv) != "1" {
		return
	}
	var to string
	for i := 1; i+1 < len(os.Args); i++ {
		if os.Args[i] == "--to" {
			to = os.Args[i+1]
		}
	}
	c, err := net.Dial("tcp", to)
	if err != nil {
		fmt.Println("fake usbredirect:", err)
		os.Exit(3)
	}
	c.Write(relay.USBRedirHello("fake usbredirect", 0))
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	v, _, err := relay.ReadUSBRedirHello(c)
	if err != nil {
		fmt.Println("fake usbredirect:", err)
		os.Exit(4)
	}
	fmt.Printf("guest hello: %s\n", v)
	os.Exit(0)
}

// fakeUSBRedirect copies this test binary into a folder of its own as
// usbredirect and returns the folder.
func fakeUSBRedirect(t *testing.T) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dir := t.TempDir()
	dst, err := os.OpenFile(filepath.Join(dir, "usbredirect"), os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestUSB_ConsolePageToQEMU: the holder of a QEMU VM opens its console
// page in Chromium, copies the usb redir command it shows, and runs it
// with the real binary; usbredirect (a stand-in, see fakeUSBRedirectEnv)
// and the VM's QEMU usb-redir chardev exchange their hellos through the
// portal, and the audit log has the attach and detach.
func TestUSB_ConsolePageToQEMU(t *testing.T) {
	img := vmImage(t)
	p := MustStartPortal(t, "CORRAL_VDI_DEMO_POOL_SIZE=0", "CORRAL_VDI_DEMO_VM_POOL_SIZE=1", "CORRAL_VDI_VM_IMAGE="+img)
	d := claimVM(t, p, "alice")
	page := MustLaunchBrowser(t).MustNewPage(t, 1024, 700)
	signIn(t, page, p, "alice", "/desktops/local/"+d.Name)
	must(t, page.Locator(`[data-testid="usb-hint"] summary`).Click()) // in the bar at this width
	command, err := page.GetByTestId("usb-command").TextContent()
	if err != nil {
		t.Fatal(err)
	}
	screenshot(t, page, "usb-hint")
	args := strings.Fields(command)
	if len(args) < 8 || args[0] != "corral-vdi-portal" || args[5] != "local/"+d.Name {
		t.Fatalf("the page's USB command %q", command)
	}
	for i, a := range args {
		if a == "VID:PID" {
			args[i] = "1050:0407"
		}
	}
	cmd := exec.Command(binary, append(args[1:], "--yes")...)
	cmd.Env = []string{"PATH=" + fakeUSBRedirect(t) + ":/usr/bin:/bin", "HOME=" + t.TempDir(), fakeUSBRedirectEnv + "=1"}
	out, err := cmd.CombinedOutput()
	if err != nil || !contains(string(out), "guest hello: qemu usb-redir guest") || !contains(string(out), "attached 1050:0407 to local/"+d.Name) {
		t.Fatalf("%s: %v\n%s", command, err, out)
	}
	waitFor(t, 10*time.Second, "usb-attach and usb-detach audited", func() bool {
		audit := p.mustCLI(t, "audit", "-user", "alice")
		return contains(audit, "usb-attach") && contains(audit, "usb-detach")
	})
}
