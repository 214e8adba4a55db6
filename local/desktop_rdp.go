package local

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"unicode/utf16"
)

// RDP on a session desktop: freerdp-shadow-cli shares the desktop's X display
// over RDP with NLA. It listens on a Unix socket in the member's private
// folder (not on TCP), so only this user can reach it, and it checks NLA
// sign-ins against a per-member SAM file holding one random password. The
// server's own state (its TLS key and certificate under
// ~/.config/freerdp/shadow/) lives in a HOME of its own inside the member's
// folder, apart from the desktop user's files.

const (
	rdpShadow       = "freerdp-shadow" // process and log name
	rdpSocketName   = "rdp.sock"
	rdpSAMName      = "rdp.sam"
	rdpPasswordName = "rdp.password"
	rdpHomeName     = "rdp-home"

	// RDPUser is the user name of every local desktop's RDP sign-in.
	RDPUser = "corral"
)

// rdpDeps lists what RDP needs; without it a desktop offers VNC only.
var rdpDeps = []struct{ bin, pkg string }{
	{"freerdp-shadow-cli", "freerdp2-shadow-x11"},
}

// lookRDP returns the path of freerdp-shadow-cli, or an error naming the
// Debian package to install.
func lookRDP() (string, error) {
	p, err := exec.LookPath(rdpDeps[0].bin)
	if err != nil {
		return "", fmt.Errorf("%s not found: install the Debian package %s", rdpDeps[0].bin, rdpDeps[0].pkg)
	}
	return p, nil
}

// prepareRDP writes what freerdp-shadow-cli needs, a fresh password and
// the SAM file that holds its hash and a HOME of its own, before any
// process of the desktop runs, and returns the server's path; "" and an
// error when the desktop is to have no RDP.
func (d *Desktop) prepareRDP() (string, error) {
	bin, err := lookRDP()
	if err != nil {
		return "", err
	}
	if err := mkdirIn(d.spec.Dir, rdpHomeName, d.spec.User); err != nil {
		return "", err
	}
	password, err := newRDPPassword()
	if err != nil {
		return "", err
	}
	// The password file is the only record of the password: the portal shows
	// it to the desktop's holder, also after a restart adopted the desktop.
	if err := os.WriteFile(filepath.Join(d.spec.State, rdpPasswordName), []byte(password), 0o600); err != nil {
		return "", err
	}
	// freerdp reads it as the desktop's uid.
	if err := writeFileIn(d.spec.Dir, rdpSAMName, []byte(samEntry(RDPUser, password)), d.spec.User); err != nil {
		return "", err
	}
	return bin, nil
}

// rdpServer returns the desktop's RDP server, freerdp-shadow-cli (bin)
// on the running display, for startServers.
func (d *Desktop) rdpServer(bin string) *server {
	dir := d.spec.Dir
	home := filepath.Join(dir, rdpHomeName)
	sam := filepath.Join(dir, rdpSAMName)
	sock := filepath.Join(dir, rdpSocketName)
	s := &server{name: rdpShadow, what: "RDP", bin: bin, cwd: home, sock: sock}
	if err := os.Remove(sock); err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.err = err
		return s
	}
	s.env = d.Env()
	for i, kv := range s.env {
		if strings.HasPrefix(kv, "HOME=") {
			s.env[i] = "HOME=" + home
		}
	}
	s.args = []string{"/ipc-socket:" + sock, "/sec:nla", "/sam-file:" + sam}
	return s
}

// RDPSocket returns the Unix socket of the desktop's RDP server, or "" when
// it has none running.
func (d *Desktop) RDPSocket() string {
	for _, p := range d.procs {
		if p.Name == rdpShadow && p.alive() {
			return filepath.Join(d.spec.Dir, rdpSocketName)
		}
	}
	return ""
}

// RDPCredentials returns the NLA sign-in of the desktop's RDP server.
func (d *Desktop) RDPCredentials() (user, password string, err error) {
	b, err := os.ReadFile(filepath.Join(d.spec.State, rdpPasswordName))
	if err != nil {
		return "", "", fmt.Errorf("local: RDP password of %q: %w", d.spec.Name, err)
	}
	return RDPUser, string(b), nil
}

// RDPConn is a connection to a local desktop's RDP server that also knows
// the server's sign-in, which the portal shows to the desktop's holder.
type RDPConn struct {
	net.Conn
	user, password string
}

// Credentials returns the user name and password the RDP server accepts.
func (c *RDPConn) Credentials() (user, password string) { return c.user, c.password }

// dialRDP connects to the desktop's RDP server.
func (d *Desktop) dialRDP(ctx context.Context) (*RDPConn, error) {
	sock := d.RDPSocket()
	if sock == "" {
		return nil, fmt.Errorf("local: desktop %q has no RDP server running", d.spec.Name)
	}
	user, password, err := d.RDPCredentials()
	if err != nil {
		return nil, err
	}
	c, err := d.dialSocket(ctx, sock)
	if err != nil {
		return nil, err
	}
	return &RDPConn{Conn: c, user: user, password: password}, nil
}

// newRDPPassword returns 20 random characters that survive copy and paste
// and any keyboard layout: hex.
func newRDPPassword() (string, error) {
	b := make([]byte, 10)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// samEntry returns the line winpr-hash -f sam prints for user and password:
// "user:::NTHASH:::" with an empty domain. It is computed here rather than
// with winpr-hash so that the password never appears on a command line,
// which other local users can read.
func samEntry(user, password string) string {
	return user + ":::" + hex.EncodeToString(ntHash(password)) + ":::\n"
}

// ntHash is the NT one-way function: MD4 of the UTF-16LE password.
func ntHash(password string) []byte {
	u := utf16.Encode([]rune(password))
	b := make([]byte, 2*len(u))
	for i, c := range u {
		b[2*i], b[2*i+1] = byte(c), byte(c>>8)
	}
	return md4(b)
}
