package relay_test

import (
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/corral-dev/corral-vdi-portal/relay"
)

// resizeRecorder is a desktop stream stand-in's Resizer.
type resizeRecorder struct {
	mu  sync.Mutex
	got []relay.Resize
}

var _ relay.Resizer = (*resizeRecorder)(nil)

func (r *resizeRecorder) Resize(cols, rows uint16) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, relay.Resize{Cols: cols, Rows: rows})
	return nil
}

func TestPipe_ResizeNeverReachesTheDesktop(t *testing.T) {
	rec := new(resizeRecorder)
	h := MustHarness(t, "tcp", relay.Options{Control: relay.TerminalControl(rec)})
	ws, desk := h.MustConnect(t)
	defer desk.Close()

	for _, m := range []struct {
		kind int
		data string
	}{
		{websocket.TextMessage, "ls"},
		{websocket.TextMessage, `{"type":"resize","cols":132,"rows":43}`},
		{websocket.TextMessage, `{"type":"resize","cols":0,"rows":43}`},    // no size to take: dropped, not typed
		{websocket.TextMessage, `{"type":"resize","cols":-1,"rows":4000}`}, // the same
		{websocket.BinaryMessage, `{"type":"resize","cols":1,"rows":1}`},   // binary frames are always bytes
		{websocket.TextMessage, "\r"},
	} {
		if err := ws.WriteMessage(m.kind, []byte(m.data)); err != nil {
			t.Fatal(err)
		}
	}
	ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
	got := string(readEOF(t, desk))
	if want := `ls{"type":"resize","cols":1,"rows":1}` + "\r"; got != want {
		t.Errorf("desktop read %q; want %q", got, want)
	}
	h.MustResult(t)
	ws.Close()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.got) != 1 || rec.got[0] != (relay.Resize{Cols: 132, Rows: 43}) {
		t.Errorf("resizes = %v; want [{132 43}]", rec.got)
	}
}

func TestPipe_SerialDropsResize(t *testing.T) {
	// A serial line is no Resizer: the message is dropped, not typed.
	h := MustHarness(t, "tcp", relay.Options{Control: relay.TerminalControl(struct{}{})})
	ws, desk := h.MustConnect(t)
	defer desk.Close()
	ws.WriteMessage(websocket.TextMessage, relay.ResizeMessage(relay.Resize{Cols: 80, Rows: 24}))
	ws.WriteMessage(websocket.TextMessage, []byte("root\r"))
	ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
	if got := string(readEOF(t, desk)); got != "root\r" {
		t.Errorf("desktop read %q; want %q", got, "root\r")
	}
	h.MustResult(t)
	ws.Close()
}

func TestPipe_PingNoticesADeadClient(t *testing.T) {
	h := MustHarness(t, "tcp", relay.Options{PingEvery: 100 * time.Millisecond})
	ws, desk := h.MustConnect(t)
	defer desk.Close()
	defer ws.Close()

	// A client that reads answers pings (gorilla's default ping handler) and
	// stays connected well past the ping interval.
	go func() {
		for {
			if _, _, err := ws.ReadMessage(); err != nil {
				return
			}
		}
	}()
	select {
	case r := <-h.results:
		t.Fatalf("relay ended with a live client: %v", r.err)
	case <-time.After(600 * time.Millisecond):
	}
	h.cancel()
	h.MustResult(t)

	// A client that never reads never answers: the relay ends on its own.
	h2 := MustHarness(t, "tcp", relay.Options{PingEvery: 100 * time.Millisecond})
	ws2, desk2 := h2.MustConnect(t)
	defer desk2.Close()
	defer ws2.Close()
	r := h2.MustResult(t) // a relay that waited on the silent client would not return
	if r.err == nil {
		t.Error("Pipe error = nil; want a timeout for the silent client")
	}
	readEOF(t, desk2)
}
