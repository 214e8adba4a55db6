package relay_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"go.uber.org/goleak"

	"github.com/corral-dev/corral-vdi-portal/relay"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(serveEnv); mode != "" { // a relay process of BenchmarkRelays
		os.Exit(serveBenchRelay(mode, os.Getenv(targetEnv)))
	}
	goleak.VerifyTestMain(m)
}

// result is what one Pipe call returned.
type result struct {
	stats relay.Stats
	err   error
}

// harness is a real relay: an httptest server whose handler upgrades, dials
// a desktop listener and runs Pipe. The test plays both the browser (a
// websocket client) and the desktop (the accepted connection).
type harness struct {
	srv     *httptest.Server
	ln      net.Listener
	cancel  context.CancelFunc
	results chan result
}

// MustHarness starts a relay whose desktop listens on network ("tcp" or
// "unix"). Everything is closed at the end of the test.
func MustHarness(tb testing.TB, network string, opts relay.Options) *harness {
	tb.Helper()
	addr := "127.0.0.1:0"
	if network == "unix" {
		addr = filepath.Join(tb.TempDir(), "desktop.sock")
	}
	ln, err := net.Listen(network, addr)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &harness{ln: ln, cancel: cancel, results: make(chan result, 128)}
	up := relay.Upgrader(nil)
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		conn, err := net.Dial(network, ln.Addr().String())
		if err != nil {
			ws.Close()
			h.results <- result{err: err}
			return
		}
		stats, err := relay.Pipe(ctx, ws, conn, opts)
		h.results <- result{stats, err}
	}))
	tb.Cleanup(func() {
		cancel()
		h.srv.Close()
		ln.Close()
	})
	return h
}

// MustConnect opens a browser connection and returns it with the desktop's
// end of the relayed stream.
func (h *harness) MustConnect(tb testing.TB) (*websocket.Conn, net.Conn) {
	tb.Helper()
	d := websocket.Dialer{WriteBufferSize: relay.DefaultBufferSize}
	ws, _, err := d.Dial("ws"+strings.TrimPrefix(h.srv.URL, "http"), nil)
	if err != nil {
		tb.Fatal(err)
	}
	desk, err := h.ln.Accept()
	if err != nil {
		ws.Close()
		tb.Fatal(err)
	}
	return ws, desk
}

// MustResult waits for the relay to return.
func (h *harness) MustResult(tb testing.TB) result {
	tb.Helper()
	select {
	case r := <-h.results:
		return r
	case <-time.After(10 * time.Second):
		tb.Fatal("relay did not return")
		return result{}
	}
}

// readClose reads from the client until the relay closes the websocket and
// returns the close error.
func readClose(tb testing.TB, ws *websocket.Conn) *websocket.CloseError {
	tb.Helper()
	ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		if _, _, err := ws.ReadMessage(); err != nil {
			var ce *websocket.CloseError
			if !errors.As(err, &ce) {
				tb.Fatalf("client read: %v; want a close frame", err)
			}
			return ce
		}
	}
}

// readEOF reads from the desktop until EOF and returns what it read.
func readEOF(tb testing.TB, desk net.Conn) []byte {
	tb.Helper()
	desk.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(desk)
	if err != nil {
		tb.Fatalf("desktop read: %v; want EOF", err)
	}
	return b
}

func TestPipe_Echo(t *testing.T) {
	for _, network := range []string{"tcp", "unix"} {
		t.Run(network, func(t *testing.T) {
			h := MustHarness(t, network, relay.Options{})
			ws, desk := h.MustConnect(t)
			defer ws.Close()
			go func() {
				io.Copy(desk, desk)
				desk.Close()
			}()

			data := make([]byte, 1<<20)
			rand.Read(data)
			sent := make(chan struct{})
			go func() {
				defer close(sent)
				// Uneven message sizes, so messages and reads never line up.
				for p, i := data, 1; len(p) > 0; i++ {
					n := min(len(p), i*997%65536+1)
					if err := ws.WriteMessage(websocket.BinaryMessage, p[:n]); err != nil {
						return
					}
					p = p[n:]
				}
			}()

			got := make([]byte, 0, len(data))
			ws.SetReadDeadline(time.Now().Add(10 * time.Second))
			for len(got) < len(data) {
				typ, p, err := ws.ReadMessage()
				if err != nil {
					t.Fatalf("after %d bytes: %v", len(got), err)
				}
				if typ != websocket.BinaryMessage {
					t.Fatalf("message type = %d; want binary", typ)
				}
				got = append(got, p...)
			}
			if sha256.Sum256(got) != sha256.Sum256(data) {
				t.Fatal("echoed bytes differ from sent bytes")
			}
			<-sent

			ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
			readClose(t, ws)
			r := h.MustResult(t)
			if r.err != nil {
				t.Errorf("Pipe error = %v; want nil", r.err)
			}
			want := relay.Stats{BytesIn: int64(len(data)), BytesOut: int64(len(data))}
			if r.stats != want {
				t.Errorf("stats = %+v; want %+v", r.stats, want)
			}
		})
	}
}

func TestPipe_TextFramesAsBytes(t *testing.T) {
	h := MustHarness(t, "tcp", relay.Options{})
	ws, desk := h.MustConnect(t)
	defer ws.Close()
	defer desk.Close()

	ws.WriteMessage(websocket.TextMessage, []byte("ls -l\r"))
	ws.WriteMessage(websocket.BinaryMessage, []byte{0, 1, 2})
	ws.WriteMessage(websocket.TextMessage, []byte("é\x03"))
	want := []byte("ls -l\r\x00\x01\x02é\x03")
	got := make([]byte, len(want))
	desk.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(desk, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("desktop got %q; want %q", got, want)
	}
}

func TestPipe_DesktopCloses(t *testing.T) {
	h := MustHarness(t, "tcp", relay.Options{})
	ws, desk := h.MustConnect(t)
	defer ws.Close()

	desk.Write([]byte("bye"))
	desk.Close()
	typ, p, err := ws.ReadMessage()
	if err != nil || typ != websocket.BinaryMessage || string(p) != "bye" {
		t.Fatalf("ReadMessage = %d, %q, %v; want binary \"bye\"", typ, p, err)
	}
	ce := readClose(t, ws)
	if ce.Code != websocket.CloseNormalClosure || ce.Text != "desktop closed the connection" {
		t.Errorf("close = %d %q; want 1000 \"desktop closed the connection\"", ce.Code, ce.Text)
	}
	r := h.MustResult(t)
	if r.err != nil {
		t.Errorf("Pipe error = %v; want nil", r.err)
	}
	if want := (relay.Stats{BytesOut: 3}); r.stats != want {
		t.Errorf("stats = %+v; want %+v", r.stats, want)
	}
}

func TestPipe_DesktopClosesSilentClient(t *testing.T) {
	// A client that never answers the close frame costs at most the grace.
	h := MustHarness(t, "tcp", relay.Options{})
	ws, desk := h.MustConnect(t)
	defer ws.Close()

	desk.Close()
	r := h.MustResult(t) // waiting for a close frame that never comes would not return
	if r.err != nil {
		t.Errorf("Pipe error = %v; want nil", r.err)
	}
}

func TestPipe_ClientCloses(t *testing.T) {
	h := MustHarness(t, "tcp", relay.Options{})
	ws, desk := h.MustConnect(t)
	defer ws.Close()
	defer desk.Close()

	ws.WriteMessage(websocket.BinaryMessage, []byte("hi"))
	ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseGoingAway, "tab closed"))
	if got := readEOF(t, desk); string(got) != "hi" {
		t.Errorf("desktop got %q; want \"hi\"", got)
	}
	if ce := readClose(t, ws); ce.Code != websocket.CloseGoingAway {
		t.Errorf("close echo = %d; want %d", ce.Code, websocket.CloseGoingAway)
	}
	r := h.MustResult(t)
	if r.err != nil {
		t.Errorf("Pipe error = %v; want nil", r.err)
	}
	if want := (relay.Stats{BytesIn: 2}); r.stats != want {
		t.Errorf("stats = %+v; want %+v", r.stats, want)
	}
}

func TestPipe_ClientDrops(t *testing.T) {
	// A client that vanishes without a close frame is an abnormal end.
	h := MustHarness(t, "tcp", relay.Options{})
	ws, desk := h.MustConnect(t)
	defer desk.Close()

	ws.NetConn().Close()
	readEOF(t, desk)
	if r := h.MustResult(t); r.err == nil {
		t.Error("Pipe error = nil; want the dropped connection")
	}
}

func TestPipe_ContextCancel(t *testing.T) {
	h := MustHarness(t, "unix", relay.Options{})
	ws, desk := h.MustConnect(t)
	defer ws.Close()
	defer desk.Close()

	h.cancel()
	if ce := readClose(t, ws); ce.Code != websocket.CloseGoingAway {
		t.Errorf("close = %d; want %d", ce.Code, websocket.CloseGoingAway)
	}
	readEOF(t, desk)
	if r := h.MustResult(t); !errors.Is(r.err, context.Canceled) {
		t.Errorf("Pipe error = %v; want context.Canceled", r.err)
	}
}

func TestPipe_CountersAndOnInput(t *testing.T) {
	var (
		counters relay.Counters
		mu       sync.Mutex
		input    []byte
	)
	opts := relay.Options{
		Counters:   &counters,
		BufferSize: 1000, // smaller than some messages: OnInput sees chunks
		OnInput: func(p []byte) {
			mu.Lock()
			input = append(input, p...)
			mu.Unlock()
		},
	}
	h := MustHarness(t, "tcp", opts)
	ws, desk := h.MustConnect(t)
	defer ws.Close()

	var sent []byte
	for i := range 50 {
		p := make([]byte, i*97)
		rand.Read(p)
		sent = append(sent, p...)
		ws.WriteMessage(websocket.BinaryMessage, p)
	}
	got := make([]byte, len(sent))
	desk.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(desk, got); err != nil {
		t.Fatal(err)
	}
	out := make([]byte, 12345)
	desk.Write(out)
	for n := 0; n < len(out); {
		_, p, err := ws.ReadMessage()
		if err != nil {
			t.Fatal(err)
		}
		if len(p) > 1000 {
			t.Errorf("message of %d bytes; want at most BufferSize", len(p))
		}
		n += len(p)
	}

	// Counters are readable while the relay runs. They count after each
	// write returns, which may be just after the peer has read the bytes.
	want := relay.Stats{BytesIn: int64(len(sent)), BytesOut: int64(len(out))}
	deadline := time.Now().Add(5 * time.Second)
	for counters.Stats() != want && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := counters.Stats(); got != want {
		t.Errorf("live counters = %+v; want %+v", got, want)
	}
	mu.Lock()
	if !bytes.Equal(input, sent) {
		t.Errorf("OnInput saw %d bytes; want the %d sent", len(input), len(sent))
	}
	mu.Unlock()

	desk.Close()
	readClose(t, ws)
	r := h.MustResult(t)
	if r.stats != want {
		t.Errorf("stats = %+v; want %+v", r.stats, want)
	}
	if got := counters.Stats(); got != want {
		t.Errorf("final counters = %+v; want %+v", got, want)
	}
}

func TestPipe_MessageTooBig(t *testing.T) {
	h := MustHarness(t, "tcp", relay.Options{MaxMessage: 1024})
	ws, desk := h.MustConnect(t)
	defer ws.Close()

	ws.WriteMessage(websocket.BinaryMessage, make([]byte, 1024))
	ws.WriteMessage(websocket.BinaryMessage, make([]byte, 1025))
	if ce := readClose(t, ws); ce.Code != websocket.CloseMessageTooBig {
		t.Errorf("close = %d; want %d", ce.Code, websocket.CloseMessageTooBig)
	}
	if got := readEOF(t, desk); len(got) != 1024 {
		t.Errorf("desktop got %d bytes; want only the 1024-byte message", len(got))
	}
	if r := h.MustResult(t); !errors.Is(r.err, websocket.ErrReadLimit) {
		t.Errorf("Pipe error = %v; want %v", r.err, websocket.ErrReadLimit)
	}
}

func TestPipe_NoLeaks(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())

	h := MustHarness(t, "tcp", relay.Options{})
	for i := range 100 {
		ws, desk := h.MustConnect(t)
		ws.WriteMessage(websocket.BinaryMessage, []byte("ping"))
		buf := make([]byte, 4)
		desk.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadFull(desk, buf); err != nil {
			t.Fatal(err)
		}
		desk.Write([]byte("pong"))
		if _, _, err := ws.ReadMessage(); err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 {
			desk.Close()
			readClose(t, ws)
			ws.Close()
		} else {
			ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
			readEOF(t, desk)
			readClose(t, ws)
			ws.Close()
			desk.Close()
		}
		if r := h.MustResult(t); r.err != nil {
			t.Fatalf("cycle %d: Pipe error = %v", i, r.err)
		}
	}
	// Closing the server waits for its handlers, so nothing may remain.
	h.srv.Close()
	h.ln.Close()
}

func TestUpgrader(t *testing.T) {
	tests := []struct {
		name         string
		checkOrigin  func(*http.Request) bool
		origin       string
		protocols    []string
		wantStatus   int
		wantProtocol string
	}{
		{name: "binary", protocols: []string{"binary"}, wantStatus: 101, wantProtocol: "binary"},
		{name: "none", wantStatus: 101},
		{name: "unknown", protocols: []string{"base64"}, wantStatus: 101},
		{name: "same origin", origin: "SAME", wantStatus: 101},
		{name: "cross origin", origin: "https://evil.example", wantStatus: 403},
		{name: "custom check", origin: "https://evil.example", wantStatus: 101,
			checkOrigin: func(*http.Request) bool { return true }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := relay.Upgrader(tt.checkOrigin)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				ws, err := up.Upgrade(w, r, nil)
				if err != nil {
					return
				}
				ws.Close()
			}))
			defer srv.Close()

			hdr := http.Header{}
			if tt.origin == "SAME" {
				hdr.Set("Origin", srv.URL)
			} else if tt.origin != "" {
				hdr.Set("Origin", tt.origin)
			}
			d := websocket.Dialer{Subprotocols: tt.protocols, EnableCompression: true}
			ws, resp, err := d.Dial("ws"+strings.TrimPrefix(srv.URL, "http"), hdr)
			if ws != nil {
				defer ws.Close()
			}
			if resp == nil {
				t.Fatalf("Dial: %v", err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status = %d; want %d", resp.StatusCode, tt.wantStatus)
			}
			if ws == nil {
				return
			}
			if got := ws.Subprotocol(); got != tt.wantProtocol {
				t.Errorf("subprotocol = %q; want %q", got, tt.wantProtocol)
			}
			if ext := resp.Header.Get("Sec-WebSocket-Extensions"); ext != "" {
				t.Errorf("extensions = %q; want none (compression off)", ext)
			}
		})
	}
}
