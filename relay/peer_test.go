package relay_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/relay"
)

func TestPeerAuth(t *testing.T) {
	secret := []byte("0123456789abcdef0123")
	now := time.Unix(1_800_000_000, 0)
	sig := relay.SignPeer(secret, now, "peer-b:8080", "serial", "local", "vm-1")
	tests := []struct {
		name     string
		secret   []byte
		header   string
		at       time.Time
		host     string
		protocol string
		member   string
		ok       bool
	}{
		{"OK", secret, sig, now, "peer-b:8080", "serial", "vm-1", true},
		{"HostCase", secret, sig, now, "PEER-B:8080", "serial", "vm-1", true},
		{"ClockSkewWithin", secret, sig, now.Add(25 * time.Second), "peer-b:8080", "serial", "vm-1", true},
		{"Stale", secret, sig, now.Add(time.Minute), "peer-b:8080", "serial", "vm-1", false},
		{"OtherPeer", secret, sig, now, "peer-c:8080", "serial", "vm-1", false},
		{"OtherMember", secret, sig, now, "peer-b:8080", "serial", "vm-2", false},
		{"OtherProtocol", secret, sig, now, "peer-b:8080", "vnc", "vm-1", false},
		{"WrongSecret", []byte("another-secret-of-20b"), sig, now, "peer-b:8080", "serial", "vm-1", false},
		{"NoSecret", nil, sig, now, "peer-b:8080", "serial", "vm-1", false},
		{"Empty", secret, "", now, "peer-b:8080", "serial", "vm-1", false},
		{"Garbage", secret, "v2 x y z", now, "peer-b:8080", "serial", "vm-1", false},
		{"OldVersion", secret, "v1 1800000000 " + strings.Repeat("0", 64), now, "peer-b:8080", "serial", "vm-1", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := relay.CheckPeerAuth(tt.secret, tt.header, tt.at, tt.host, tt.protocol, "local", tt.member)
			if (err == nil) != tt.ok {
				t.Errorf("CheckPeerAuth = %v; want ok=%v", err, tt.ok)
			}
			if err != nil && !errors.Is(err, relay.ErrPeerAuth) {
				t.Errorf("CheckPeerAuth = %v; want ErrPeerAuth", err)
			}
		})
	}
}

// TestPeerVerifier_Once: a signature is accepted once; a replay within
// the clock window is refused.
func TestPeerVerifier_Once(t *testing.T) {
	secret := []byte("0123456789abcdef0123")
	now := time.Unix(1_800_000_000, 0)
	v := relay.NewPeerVerifier(secret)
	sig := relay.SignPeer(secret, now, "peer-b:8080", "terminal", "local", "demo-1")
	if _, err := v.Check(sig, now, "peer-b:8080", "terminal", "local", "demo-1"); err != nil {
		t.Fatalf("first use: %v", err)
	}
	if _, err := v.Check(sig, now.Add(time.Second), "peer-b:8080", "terminal", "local", "demo-1"); !errors.Is(err, relay.ErrPeerAuth) {
		t.Errorf("replay: %v; want ErrPeerAuth", err)
	}
	if _, err := v.Check(relay.SignPeer(secret, now, "peer-b:8080", "terminal", "local", "demo-1"), now, "peer-b:8080", "terminal", "local", "demo-1"); err != nil {
		t.Errorf("a fresh signature after a replay: %v", err)
	}
}

// TestDialPeer runs a peer portal's side for real (check the signature,
// upgrade, Pipe with terminal control to a desktop listener) and a peer link
// to it: bytes flow both ways, a resize arrives as a resize, a bad secret is
// refused before the upgrade, and nothing outlives the links (goleak).
func TestDialPeer(t *testing.T) {
	secret := []byte("0123456789abcdef0123")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	rec := new(resizeRecorder)
	up := relay.Upgrader(nil)
	v := relay.NewPeerVerifier(secret)
	pipes := make(chan error, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		parts := strings.Split(strings.TrimPrefix(r.URL.Path, relay.PeerPath), "/")
		if len(parts) != 3 {
			http.Error(w, "no such peer link", http.StatusNotFound)
			return
		}
		if _, err := v.Check(r.Header.Get(relay.PeerAuthHeader), time.Now(), r.Host, parts[0], parts[1], parts[2]); err != nil {
			http.Error(w, "peer signature not valid", http.StatusUnauthorized)
			return
		}
		conn, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			conn.Close()
			return
		}
		_, err = relay.Pipe(r.Context(), ws, conn, relay.Options{Control: relay.TerminalControl(rec)})
		pipes <- err
	}))
	defer srv.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := relay.DialPeer(ctx, srv.URL, []byte("wrong-secret-0123456789"), "terminal", "local", "demo-1"); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("DialPeer with a wrong secret = %v; want a 401 refusal", err)
	}

	for i := range 20 { // open and close repeatedly: goleak checks nothing stays
		c, err := relay.DialPeer(ctx, srv.URL, secret, "terminal", "local", "demo-1")
		if err != nil {
			t.Fatal(err)
		}
		desk, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		c.Write([]byte("ls\r"))
		if i == 0 {
			c.Resize(90, 33)
		}
		c.Write([]byte("x"))
		buf := make([]byte, 4)
		desk.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadFull(desk, buf); err != nil || string(buf) != "ls\rx" {
			t.Fatalf("desktop read %q, %v; want %q (the resize is no bytes)", buf, err, "ls\rx")
		}
		desk.Write([]byte("hello"))
		got := make([]byte, 5)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadFull(c, got); err != nil || string(got) != "hello" {
			t.Fatalf("peer link read %q, %v; want hello", got, err)
		}
		if i%2 == 0 {
			c.Close() // the user's side ends
			if err := <-pipes; err != nil {
				t.Errorf("peer side Pipe = %v; want a clean close", err)
			}
			desk.Close()
		} else {
			desk.Close() // the desktop ends: the link reads EOF
			if n, err := c.Read(got); err != io.EOF {
				t.Errorf("peer link read after the desktop closed = %d, %v; want EOF", n, err)
			}
			<-pipes
			c.Close()
		}
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.got) != 1 || rec.got[0] != (relay.Resize{Cols: 90, Rows: 33}) {
		t.Errorf("resizes at the peer = %v; want [{90 33}]", rec.got)
	}
}
