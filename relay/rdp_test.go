package relay

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/asn1"
	"errors"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// x224Request is a real X.224 Connection Request asking for TLS or CredSSP,
// as IronRDP sends it (without a cookie).
var x224Request = []byte{0x03, 0x00, 0x00, 0x13, 0x0e, 0xe0, 0, 0, 0, 0, 0, 0x01, 0x00, 0x08, 0x00, 0x03, 0, 0, 0}

// x224Confirm returns a Connection Confirm with a negotiation response
// (typ 2, selecting proto) or failure (typ 3, code proto).
func x224Confirm(typ byte, proto byte) []byte {
	return []byte{0x03, 0x00, 0x00, 0x13, 0x0e, 0xd0, 0, 0, 0x12, 0x34, 0, typ, 0x00, 0x08, 0x00, proto, 0, 0, 0}
}

// fakeRDPServer listens on a Unix socket and runs serve for one connection.
// It stands in for an RDP server at the byte level, to script failures a
// real one cannot be made to produce.
func fakeRDPServer(t *testing.T, serve func(c net.Conn)) (dial func() net.Conn, accepted <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("unix", t.TempDir()+"/rdp.sock")
	if err != nil {
		t.Fatal(err)
	}
	acc := make(chan struct{}, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		acc <- struct{}{}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		serve(c)
	}()
	t.Cleanup(func() { ln.Close(); <-done })
	return func() net.Conn {
		c, err := net.Dial("unix", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		return c
	}, acc
}

func selfSignedCert(t *testing.T) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func request(x224 []byte) *RDCleanPathPDU {
	return &RDCleanPathPDU{Version: RDCleanPathVersion, Destination: "d:3389", ProxyAuth: "tok", X224: x224}
}

func wantRDPError(t *testing.T, err error, want RDCleanPathError) *RDPError {
	t.Helper()
	var re *RDPError
	if !errors.As(err, &re) {
		t.Fatalf("error = %v; want an *RDPError", err)
	}
	if re.Reply != want {
		t.Fatalf("reply = %+v (%v); want %+v", re.Reply, err, want)
	}
	return re
}

func TestRDPConnect_TLSAndPlaintext(t *testing.T) {
	cert := selfSignedCert(t)
	got := make(chan []byte, 1)
	dial, _ := fakeRDPServer(t, func(c net.Conn) {
		cr := make([]byte, len(x224Request))
		if _, err := io.ReadFull(c, cr); err != nil || !bytes.Equal(cr, x224Request) {
			t.Errorf("server got X.224 % x, %v; want the client's bytes unchanged", cr, err)
			return
		}
		c.Write(x224Confirm(2, 2))
		tc := tls.Server(c, &tls.Config{Certificates: []tls.Certificate{cert}})
		buf := make([]byte, 5)
		if _, err := io.ReadFull(tc, buf); err != nil {
			t.Error(err)
		}
		got <- buf
		tc.Write([]byte("world"))
	})
	s, resp, err := RDPConnect(context.Background(), dial(), request(x224Request), "127.0.0.1:3389")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if resp.Version != RDCleanPathVersion || !bytes.Equal(resp.X224, x224Confirm(2, 2)) || resp.ServerAddr != "127.0.0.1:3389" ||
		len(resp.ServerCertChain) != 1 || !bytes.Equal(resp.ServerCertChain[0], cert.Certificate[0]) || resp.Error != nil {
		t.Fatalf("response = %+v; want version, the confirm, the server's certificate and address", resp)
	}
	s.Write([]byte("hello"))
	if b := <-got; string(b) != "hello" {
		t.Errorf("server read %q through TLS; want hello", b)
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(s, buf); err != nil || string(buf) != "world" {
		t.Errorf("client read %q, %v; want world", buf, err)
	}
}

func TestRDPConnect_Failures(t *testing.T) {
	t.Run("NegotiationFailure", func(t *testing.T) {
		dial, _ := fakeRDPServer(t, func(c net.Conn) {
			io.ReadFull(c, make([]byte, len(x224Request)))
			c.Write(x224Confirm(3, 5)) // HYBRID_REQUIRED_BY_SERVER
			io.Copy(io.Discard, c)
		})
		_, _, err := RDPConnect(context.Background(), dial(), request(x224Request), "127.0.0.1:3389")
		re := wantRDPError(t, err, RDCleanPathError{Code: RDCleanPathNegotiationError})
		if !bytes.Equal(re.X224, x224Confirm(3, 5)) {
			t.Errorf("X224 = % x; want the server's failure bytes", re.X224)
		}
	})
	t.Run("StandardSecurityOnly", func(t *testing.T) {
		dial, _ := fakeRDPServer(t, func(c net.Conn) {
			io.ReadFull(c, make([]byte, len(x224Request)))
			c.Write([]byte{0x03, 0x00, 0x00, 0x0b, 0x06, 0xd0, 0, 0, 0x12, 0x34, 0})
			io.Copy(io.Discard, c)
		})
		_, _, err := RDPConnect(context.Background(), dial(), request(x224Request), "127.0.0.1:3389")
		wantRDPError(t, err, RDCleanPathError{Code: RDCleanPathNegotiationError})
	})
	t.Run("HangsUpAfterRequest", func(t *testing.T) {
		dial, _ := fakeRDPServer(t, func(c net.Conn) { io.ReadFull(c, make([]byte, len(x224Request))) })
		_, _, err := RDPConnect(context.Background(), dial(), request(x224Request), "127.0.0.1:3389")
		wantRDPError(t, err, RDCleanPathError{Code: RDCleanPathGeneralError, WSAError: wsaConnReset})
	})
	t.Run("HangsUpInTLS", func(t *testing.T) {
		dial, _ := fakeRDPServer(t, func(c net.Conn) {
			io.ReadFull(c, make([]byte, len(x224Request)))
			c.Write(x224Confirm(2, 1))
			c.Read(make([]byte, 512)) // the ClientHello, then hang up
		})
		_, _, err := RDPConnect(context.Background(), dial(), request(x224Request), "127.0.0.1:3389")
		wantRDPError(t, err, RDCleanPathError{Code: RDCleanPathGeneralError, WSAError: wsaConnReset})
	})
	t.Run("BadX224NeverSent", func(t *testing.T) {
		sent := make(chan int, 1)
		dial, _ := fakeRDPServer(t, func(c net.Conn) {
			n, _ := io.Copy(io.Discard, c)
			sent <- int(n)
		})
		bad := bytes.Clone(x224Request)
		bad[3] = 0x20 // TPKT length lies
		_, _, err := RDPConnect(context.Background(), dial(), request(bad), "127.0.0.1:3389")
		wantRDPError(t, err, RDCleanPathError{Code: RDCleanPathGeneralError, HTTPStatus: http.StatusBadRequest})
		if n := <-sent; n != 0 {
			t.Errorf("server received %d bytes of a bad request; want none", n)
		}
	})
	t.Run("Timeout", func(t *testing.T) {
		dial, _ := fakeRDPServer(t, func(c net.Conn) { io.Copy(io.Discard, c) })
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		_, _, err := RDPConnect(ctx, dial(), request(x224Request), "127.0.0.1:3389")
		wantRDPError(t, err, RDCleanPathError{Code: RDCleanPathGeneralError, WSAError: wsaTimedOut})
	})
}

func TestRDPConnect_PreconnectionBlob(t *testing.T) {
	got := make(chan []byte, 1)
	dial, _ := fakeRDPServer(t, func(c net.Conn) {
		b := make([]byte, 16+2+2*3)
		io.ReadFull(c, b)
		got <- b
	})
	req := request(x224Request)
	req.PreconnectionBlob = "vm"
	RDPConnect(context.Background(), dial(), req, "")
	want := []byte{24, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 3, 0, 'v', 0, 'm', 0, 0, 0}
	if b := <-got; !bytes.Equal(b, want) {
		t.Errorf("preconnection PDU = % x; want % x", b, want)
	}
}

func TestRDPDialError(t *testing.T) {
	_, err := net.Dial("unix", t.TempDir()+"/none.sock")
	wantRDPError(t, RDPDialError(err), RDCleanPathError{Code: RDCleanPathGeneralError, WSAError: wsaRefused})
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	_, err = net.Dial("tcp", addr)
	wantRDPError(t, RDPDialError(err), RDCleanPathError{Code: RDCleanPathGeneralError, WSAError: wsaRefused})
}

// wsPair returns a client websocket connected to a server that runs serve.
func wsPair(t *testing.T, serve func(ws *websocket.Conn)) *websocket.Conn {
	t.Helper()
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer close(done)
		ws, err := Upgrader(nil).Upgrade(w, r, nil)
		if err != nil {
			return
		}
		serve(ws)
	}))
	t.Cleanup(func() { <-done; srv.Close() })
	c, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	return c
}

// readReply reads the gateway's error PDU and then its close frame.
func readReply(t *testing.T, c *websocket.Conn) *RDCleanPathPDU {
	t.Helper()
	_, b, err := c.ReadMessage()
	if err != nil {
		t.Fatalf("read reply: %v", err)
	}
	p, err := UnmarshalRDCleanPath(b)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.ReadMessage(); !websocket.IsCloseError(err, websocket.CloseNormalClosure) {
		t.Errorf("after the reply: %v; want a normal close", err)
	}
	return p
}

func TestReadRDCleanPathRequest(t *testing.T) {
	good, _ := request(x224Request).Marshal()
	oldVersion := bytes.Clone(good)
	oldVersion[bytes.Index(good, []byte{0x0d, 0x3e})+1] = 0x3d
	noToken, _ := (&RDCleanPathPDU{Version: RDCleanPathVersion, Destination: "d", X224: x224Request}).Marshal()
	noX224, _ := (&RDCleanPathPDU{Version: RDCleanPathVersion, Destination: "d", ProxyAuth: "t"}).Marshal()
	tests := []struct {
		name   string
		frames [][]byte
		status int // 0: the request is read
	}{
		{"one message", [][]byte{good}, 0},
		{"split in three", [][]byte{good[:1], good[1:7], good[7:]}, 0},
		{"garbage", [][]byte{[]byte("GET / HTTP/1.1\r\n")}, 400},
		{"trailing bytes", [][]byte{append(bytes.Clone(good), 1, 2)}, 400},
		{"version 3389", [][]byte{oldVersion}, 400},
		{"no token", [][]byte{noToken}, 401},
		{"no X.224", [][]byte{noX224}, 400},
		{"declares 1 MiB", [][]byte{{0x30, 0x83, 0x10, 0x00, 0x00}}, 400},
		{"oversized message", [][]byte{make([]byte, MaxRDCleanPathPDU+1)}, 413},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			result := make(chan error, 1)
			c := wsPair(t, func(ws *websocket.Conn) {
				req, err := ReadRDCleanPathRequest(ws)
				if err == nil && !bytes.Equal(req.X224, x224Request) {
					err = errors.New("X.224 bytes changed")
				}
				result <- err
				if err != nil {
					RejectRDCleanPath(ws, err)
				} else {
					ws.Close()
				}
			})
			for _, f := range tc.frames {
				c.WriteMessage(websocket.BinaryMessage, f)
			}
			err := <-result
			if tc.status == 0 {
				if err != nil {
					t.Fatalf("ReadRDCleanPathRequest: %v", err)
				}
				return
			}
			wantRDPError(t, err, RDCleanPathError{Code: RDCleanPathGeneralError, HTTPStatus: tc.status})
			if tc.status == 413 {
				return // the client was cut off at the read limit
			}
			p := readReply(t, c)
			if p.Error == nil || p.Error.HTTPStatus != tc.status {
				t.Errorf("reply = %+v; want HTTP %d", p, tc.status)
			}
		})
	}
}

// tsRequest is the part of a CredSSP TSRequest the tests write.
type tsRequest struct {
	Version    int           `asn1:"explicit,tag:0"`
	NegoTokens []tsNegoToken `asn1:"optional,explicit,tag:1"`
	AuthInfo   []byte        `asn1:"optional,explicit,tag:2"`
	PubKeyAuth []byte        `asn1:"optional,explicit,tag:3"`
	ErrorCode  int64         `asn1:"optional,explicit,tag:4"`
}

type tsNegoToken struct {
	Token []byte `asn1:"explicit,tag:0"`
}

func mustTS(t *testing.T, r tsRequest) []byte {
	t.Helper()
	b, err := asn1.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestPipeRDP_SignIn plays a CredSSP exchange over a TLS connection between
// a websocket client and a scripted server, for each way it can end.
func TestPipeRDP_SignIn(t *testing.T) {
	negotiate := tsRequest{Version: 6, NegoTokens: []tsNegoToken{{[]byte("NTLMSSP\x00\x01")}}}
	challenge := tsRequest{Version: 6, NegoTokens: []tsNegoToken{{[]byte("NTLMSSP\x00\x02")}}}
	authenticate := tsRequest{Version: 6, NegoTokens: []tsNegoToken{{[]byte("NTLMSSP\x00\x03")}}, PubKeyAuth: []byte("sealed key")}
	tests := []struct {
		name      string
		answer    func(t *testing.T, tc *tls.Conn) // after the authenticate message
		wantClose int
		wantErr   string
	}{
		{"LogonFailureStatus", func(t *testing.T, tc *tls.Conn) {
			tc.Write(mustTS(t, tsRequest{Version: 6, ErrorCode: -1073741715})) // 0xC000006D
		}, CloseRDPLogonFailed, "wrong user name or password"},
		{"HangUp", func(t *testing.T, tc *tls.Conn) {}, CloseRDPLogonFailed, "wrong user name or password"},
		{"OtherStatus", func(t *testing.T, tc *tls.Conn) {
			tc.Write(mustTS(t, tsRequest{Version: 6, ErrorCode: 0xC0000072})) // account disabled
		}, CloseRDPLogonFailed, "NTSTATUS 0xC0000072"},
		{"Success", func(t *testing.T, tc *tls.Conn) {
			tc.Write(mustTS(t, tsRequest{Version: 6, PubKeyAuth: []byte("server key")}))
			b, _ := readTSRequest(tc)
			if tsRequestField(b, 2) == nil {
				t.Errorf("server did not get the credentials")
			}
			mcs := make([]byte, 4)
			io.ReadFull(tc, mcs)
			tc.Write(mcs) // echo the first TPKT header back
		}, websocket.CloseNormalClosure, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cert := selfSignedCert(t)
			dial, _ := fakeRDPServer(t, func(c net.Conn) {
				io.ReadFull(c, make([]byte, len(x224Request)))
				c.Write(x224Confirm(2, 2))
				srv := tls.Server(c, &tls.Config{Certificates: []tls.Certificate{cert}})
				defer srv.Close()
				readTSRequest(srv)
				srv.Write(mustTS(t, challenge))
				readTSRequest(srv)
				tc.answer(t, srv)
			})
			s, _, err := RDPConnect(context.Background(), dial(), request(x224Request), "")
			if err != nil {
				t.Fatal(err)
			}
			result := make(chan error, 1)
			c := wsPair(t, func(ws *websocket.Conn) {
				_, err := PipeRDP(context.Background(), ws, s, Options{})
				result <- err
			})
			c.WriteMessage(websocket.BinaryMessage, mustTS(t, negotiate))
			if _, b, err := c.ReadMessage(); err != nil || !bytes.Contains(b, []byte("NTLMSSP\x00\x02")) {
				t.Fatalf("client got %q, %v; want the server's challenge", b, err)
			}
			auth := mustTS(t, authenticate)
			c.WriteMessage(websocket.BinaryMessage, auth[:5]) // a message may span frames
			c.WriteMessage(websocket.BinaryMessage, auth[5:])
			if tc.name == "Success" {
				c.ReadMessage()
				c.WriteMessage(websocket.BinaryMessage, append(mustTS(t, tsRequest{Version: 6, AuthInfo: []byte("creds")}), 3, 0, 0, 4))
				if _, b, err := c.ReadMessage(); err != nil || !bytes.Equal(b, []byte{3, 0, 0, 4}) {
					t.Fatalf("after sign-in the client got % x, %v; want the echo", b, err)
				}
			}
			var ce *websocket.CloseError
			for {
				_, b, err := c.ReadMessage()
				if err == nil && tc.wantClose == CloseRDPLogonFailed && tsRequestStatus(b) == 0 {
					t.Errorf("client got a message without a logon status before the close: %x", b)
				}
				if err != nil {
					if !errors.As(err, &ce) {
						t.Fatalf("client: %v; want a close frame", err)
					}
					break
				}
			}
			if ce.Code != tc.wantClose {
				t.Errorf("close code %d %q; want %d", ce.Code, ce.Text, tc.wantClose)
			}
			err = <-result
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("PipeRDP error = %v; want %q", err, tc.wantErr)
			}
		})
	}
}
