package local

import (
	"context"
	"crypto/tls"
	"encoding/hex"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestMD4_RFC1320(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", "31d6cfe0d16ae931b73c59d7e0c089c0"},
		{"a", "bde52cb31de33e46245e05fbdbd6fb24"},
		{"abc", "a448017aaf21d8525fc10ae87aa6729d"},
		{"message digest", "d9130a8164549fe818874806e1c7014b"},
		{"12345678901234567890123456789012345678901234567890123456789012345678901234567890", "e33b4ddc9c38f2199c3e7b164fcc0536"},
	}
	for _, tc := range tests {
		if got := hex.EncodeToString(md4([]byte(tc.in))); got != tc.want {
			t.Errorf("md4(%q) = %s; want %s", tc.in, got, tc.want)
		}
	}
}

// TestSAMEntry_MatchesWinprHash checks our SAM line against the tool that
// defines the format, with a throwaway password.
func TestSAMEntry_MatchesWinprHash(t *testing.T) {
	bin, err := exec.LookPath("winpr-hash")
	if err != nil {
		t.Skip("winpr-hash not installed (Debian package winpr-utils)")
	}
	for _, pw := range []string{"S3cret-pw", "pässwörd ✓", "0123456789abcdef0123"} {
		out, err := exec.Command(bin, "-u", "corral", "-p", pw, "-f", "sam").Output()
		if err != nil {
			t.Fatal(err)
		}
		if got := samEntry("corral", pw); strings.TrimSpace(got) != strings.TrimSpace(string(out)) {
			t.Errorf("samEntry(%q) = %q; winpr-hash says %q", pw, got, out)
		}
	}
}

// TestDesktop_RDP starts a real desktop and talks to its freerdp-shadow:
// X.224 negotiation selects NLA (HYBRID) and TLS completes with the
// server's certificate, which lives in the member's own RDP home.
func TestDesktop_RDP(t *testing.T) {
	if _, err := lookRDP(); err != nil {
		t.Skip(err)
	}
	spec := MustDesktopSpec(t, "rdp-1")
	d := MustStartDesktop(t, spec)
	if d.RDPSocket() == "" {
		t.Fatalf("desktop has no RDP server; log:\n%s", readFile(filepath.Join(spec.Dir, rdpShadow+".log")))
	}
	user, pw, err := d.RDPCredentials()
	if err != nil || user != RDPUser || len(pw) != 20 {
		t.Fatalf("RDPCredentials = %q, %d chars, %v; want %q and a 20-character password", user, len(pw), err, RDPUser)
	}
	for _, name := range []string{rdpPasswordName, rdpSAMName} {
		fi, err := os.Stat(filepath.Join(spec.Dir, name))
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, mode %v; want 0600", name, err, fi.Mode().Perm())
		}
	}
	if sam := readFile(filepath.Join(spec.Dir, rdpSAMName)); sam != samEntry(RDPUser, pw) {
		t.Errorf("SAM file does not hold the password's hash")
	}

	for _, p := range d.procs {
		if p.Name == rdpShadow {
			if ports := tcpListenersOf(t, p.PID); len(ports) > 0 {
				t.Errorf("freerdp-shadow listens on TCP ports %v; want only its Unix socket", ports)
			}
		}
	}

	c, err := d.dialRDP(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if u, p := c.Credentials(); u != user || p != pw {
		t.Errorf("RDPConn.Credentials differ from RDPCredentials")
	}
	c.SetDeadline(time.Now().Add(5 * time.Second))
	// X.224 Connection Request asking for TLS or CredSSP.
	cr := []byte{0x03, 0x00, 0x00, 0x13, 0x0e, 0xe0, 0, 0, 0, 0, 0, 0x01, 0x00, 0x08, 0x00, 0x03, 0, 0, 0}
	if _, err := c.Write(cr); err != nil {
		t.Fatal(err)
	}
	cc := make([]byte, 19)
	if _, err := io.ReadFull(c, cc); err != nil {
		t.Fatal(err)
	}
	if cc[5] != 0xd0 || cc[11] != 0x02 || cc[15] != 0x02 {
		t.Fatalf("X.224 confirm % x; want a negotiation response selecting HYBRID (2)", cc)
	}
	tc := tls.Client(c.Conn, &tls.Config{InsecureSkipVerify: true})
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	certs := tc.ConnectionState().PeerCertificates
	if len(certs) == 0 {
		t.Fatal("no server certificate")
	}
	if _, err := os.Stat(filepath.Join(spec.Dir, rdpHomeName, ".config", "freerdp", "shadow")); err != nil {
		t.Errorf("shadow server state not in the member's RDP home: %v", err)
	}
	tc.Close()

	if err := d.Stop(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{rdpSocketName, rdpPasswordName, rdpSAMName} {
		if _, err := os.Stat(filepath.Join(spec.Dir, name)); !os.IsNotExist(err) {
			t.Errorf("after Stop, %s: %v; want it removed", name, err)
		}
	}
	if _, err := net.Dial("unix", filepath.Join(spec.Dir, rdpSocketName)); err == nil {
		t.Error("RDP socket still answers after Stop")
	}
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// TestDesktop_RDPAdopted: a portal that restarts finds the desktop's RDP
// server and its sign-in again.
func TestDesktop_RDPAdopted(t *testing.T) {
	if _, err := lookRDP(); err != nil {
		t.Skip(err)
	}
	spec := MustDesktopSpec(t, "rdp-2")
	d := MustStartDesktop(t, spec)
	a, err := AdoptDesktop(spec, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Stop()
	if a.RDPSocket() == "" || a.RDPSocket() != d.RDPSocket() {
		t.Errorf("adopted RDPSocket = %q; want %q", a.RDPSocket(), d.RDPSocket())
	}
	u1, p1, _ := d.RDPCredentials()
	u2, p2, err := a.RDPCredentials()
	if err != nil || u1 != u2 || p1 != p2 {
		t.Errorf("adopted credentials differ (%v)", err)
	}
	c, err := a.dialRDP(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}
