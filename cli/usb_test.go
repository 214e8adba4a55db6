package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// mustSysfsDevice writes a USB device's sysfs attributes under root.
func mustSysfsDevice(t *testing.T, root, name string, attrs map[string]string) {
	t.Helper()
	dir := filepath.Join(root, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for k, v := range attrs {
		if err := os.WriteFile(filepath.Join(dir, k), []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestUSBList reads devices from a tree laid out as the kernel's
// /sys/bus/usb/devices: root hubs and interfaces are left out, and an
// empty tree says so.
func TestUSBList(t *testing.T) {
	root := t.TempDir()
	run := func(args ...string) string {
		t.Helper()
		var out bytes.Buffer
		e := Env{Getenv: func(k string) string { return map[string]string{"CORRAL_VDI_USB_SYSFS": root}[k] }, Out: &out, ErrOut: &out}
		if err := runUSB(context.Background(), e, append([]string{"list"}, args...)); err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	if out := run(); !strings.Contains(out, "no USB devices on this machine") {
		t.Fatalf("usb list of an empty tree: %q", out)
	}
	mustSysfsDevice(t, root, "usb1", map[string]string{"idVendor": "1d6b", "idProduct": "0002", "busnum": "1", "devnum": "1"})
	mustSysfsDevice(t, root, "1-2", map[string]string{"idVendor": "1050", "idProduct": "0407", "busnum": "1", "devnum": "4",
		"manufacturer": "Yubico", "product": "YubiKey OTP+FIDO+CCID"})
	mustSysfsDevice(t, root, "1-2:1.0", map[string]string{"bInterfaceClass": "03"})
	mustSysfsDevice(t, root, "1-3", map[string]string{"idVendor": "076b", "idProduct": "3031", "busnum": "1", "devnum": "5", "product": "Smart\x1b[2JCard"})
	out := run()
	if f := fields(out, "1050:0407"); len(f) < 4 || f[1] != "1-4" || f[2] != "Yubico" {
		t.Fatalf("usb list row of the YubiKey: %q in\n%s", f, out)
	}
	if strings.Contains(out, "1d6b") || strings.Contains(out, "\x1b") || !strings.Contains(out, "076b:3031") {
		t.Fatalf("usb list shows a root hub or control characters, or misses the reader:\n%s", out)
	}
	var devs []usbDevice
	if err := json.Unmarshal([]byte(run("-json")), &devs); err != nil || len(devs) != 2 || devs[0].ID != "1050:0407" {
		t.Fatalf("usb list -json = %+v, %v", devs, err)
	}
}

// fields returns the fields of the line of out whose first field is first.
func fields(out, first string) []string {
	for line := range strings.Lines(out) {
		if f := strings.Fields(line); len(f) > 0 && f[0] == first {
			return f
		}
	}
	return nil
}

// TestUSBRedir_BadInput checks the arguments before anything connects.
func TestUSBRedir_BadInput(t *testing.T) {
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"local/vm-1", "--device", "yubikey", "--portal", "http://x"}, "not VID:PID"},
		{[]string{"local/vm-1", "--device", "1050:0407"}, "wants --portal URL"},
		{[]string{"local/vm-1", "--device", "1050:0407", "--portal", "http://x", "--user", "u"}, "exclude each other"},
		{[]string{"vm-1", "--device", "1050:0407", "--portal", "http://x"}, "NAMESPACE/DESKTOP"},
		{[]string{"local/vm-1", "--device", "1050:0407", "--portal", "ftp://x", "--yes"}, "http(s) URL"},
	} {
		var out bytes.Buffer
		e := Env{Getenv: func(string) string { return "" }, Out: &out, ErrOut: &out}
		err := runUSB(context.Background(), e, append([]string{"redir"}, tc.args...))
		if ExitCode(err) != ExitUsage || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("usb redir %v: %v (exit %d); want a usage error saying %q", tc.args, err, ExitCode(err), tc.says)
		}
	}
}
