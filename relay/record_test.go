package relay_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/corral-dev/corral-vdi-portal/internal/testlog"
	"github.com/corral-dev/corral-vdi-portal/relay"
)

// fakeClock advances by step on every reading.
func fakeClock(step time.Duration) func() time.Time {
	var mu sync.Mutex
	t := time.Unix(1_700_000_000, 0)
	return func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		t = t.Add(step)
		return t
	}
}

// events parses an asciicast's event lines.
func events(tb testing.TB, cast string) (hdr map[string]any, evs [][3]any) {
	tb.Helper()
	lines := strings.Split(strings.TrimSuffix(cast, "\n"), "\n")
	if err := json.Unmarshal([]byte(lines[0]), &hdr); err != nil {
		tb.Fatalf("header %q: %v", lines[0], err)
	}
	for _, l := range lines[1:] {
		var ev [3]any
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			tb.Fatalf("event %q: %v", l, err)
		}
		evs = append(evs, ev)
	}
	return hdr, evs
}

func TestAsciicastRecorder(t *testing.T) {
	t.Run("OK", func(t *testing.T) {
		var buf bytes.Buffer
		a, err := relay.NewAsciicastRecorder(&buf, relay.AsciicastConfig{Now: fakeClock(time.Second), Title: "local/demo-1"})
		if err != nil {
			t.Fatal(err)
		}
		a.Output([]byte("$ "))
		a.Input([]byte("ls\r")) // not recorded: no Input in the config
		a.Resize(relay.Resize{Cols: 132, Rows: 43})
		a.Output([]byte("caf\xc3")) // "é" split across chunks
		a.Output([]byte("\xa9\r\n"))
		a.Output([]byte("bad \xff byte"))
		a.Close()
		hdr, evs := events(t, buf.String())
		if hdr["version"] != 2.0 || hdr["width"] != 80.0 || hdr["height"] != 24.0 || hdr["title"] != "local/demo-1" {
			t.Errorf("header = %v; want version 2, 80x24, the title", hdr)
		}
		want := [][3]any{{1.0, "o", "$ "}, {2.0, "r", "132x43"}, {3.0, "o", "caf"}, {4.0, "o", "é\r\n"}, {5.0, "o", "bad \ufffd byte"}}
		if len(evs) != len(want) {
			t.Fatalf("events = %v; want %v", evs, want)
		}
		for i := range want {
			if evs[i] != want[i] {
				t.Errorf("event %d = %v; want %v", i, evs[i], want[i])
			}
		}
	})

	t.Run("Input", func(t *testing.T) {
		var buf bytes.Buffer
		a, _ := relay.NewAsciicastRecorder(&buf, relay.AsciicastConfig{Input: true, Now: fakeClock(time.Millisecond)})
		a.Input([]byte("ls\r"))
		a.Input([]byte("\xe2\x82")) // an incomplete "€" at the end is written on Close
		a.Close()
		_, evs := events(t, buf.String())
		if len(evs) != 2 || evs[0][1] != "i" || evs[0][2] != "ls\r" || !strings.HasPrefix(evs[1][2].(string), "\ufffd") {
			t.Errorf("events = %v; want the keystrokes, then U+FFFD for the cut-off character", evs)
		}
	})

	t.Run("ErrWrite", func(t *testing.T) {
		w := &failAfter{n: 1}
		a, err := relay.NewAsciicastRecorder(w, relay.AsciicastConfig{})
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Output([]byte("x")); err == nil {
			t.Fatal("Output on a full disk = nil; want the error")
		}
		if err := a.Resize(relay.Resize{Cols: 1, Rows: 1}); err == nil || w.writes != 2 {
			t.Errorf("Resize after a failure = %v after %d writes; want the same error, nothing written", err, w.writes)
		}
	})
}

// failAfter fails every write after the first n.
type failAfter struct {
	n, writes int
}

func (f *failAfter) Write(p []byte) (int, error) {
	f.writes++
	if f.writes > f.n {
		return 0, errors.New("no space left on device")
	}
	return len(p), nil
}

func TestScanAsciicast(t *testing.T) {
	full := "{\"version\": 2, \"width\": 80, \"height\": 24}\n[0.5, \"o\", \"a\"]\n[1.25, \"o\", \"b\"]\n"
	for _, tc := range []struct {
		name, in  string
		valid     int
		last      time.Duration
		malformed bool
	}{
		{"Complete", full, len(full), 1250 * time.Millisecond, false},
		{"CutShort", full + `[2.0, "o", "trunc`, len(full), 1250 * time.Millisecond, false},
		{"Garbage", full + "garbage\n[3, \"o\", \"c\"]\n", len(full), 1250 * time.Millisecond, false},
		{"NoHeader", "[0.5, \"o\", \"a\"]\n", 0, 0, false},
		{"Empty", "", 0, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			valid, last, err := relay.ScanAsciicast(strings.NewReader(tc.in))
			if err != nil || valid != int64(tc.valid) || last != tc.last {
				t.Errorf("ScanAsciicast = %d, %v, %v; want %d, %v, nil", valid, last, err, tc.valid, tc.last)
			}
		})
	}
}

func TestRFBRecorder(t *testing.T) {
	t.Run("RoundTrip", func(t *testing.T) {
		var buf bytes.Buffer
		r, err := relay.NewRFBRecorder(&buf, relay.RFBRecordConfig{Now: fakeClock(10 * time.Millisecond)})
		if err != nil {
			t.Fatal(err)
		}
		r.Output([]byte("RFB 003.008\n"))
		r.Input([]byte("RFB 003.008\n"))
		r.Output([]byte{1, 1})
		r.Input([]byte{1}) // security None
		r.Output([]byte{0, 0, 0, 0})
		r.Input([]byte{1}) // ClientInit, shared
		// An update request passes; the key event and pointer event after it do not.
		r.Input([]byte{3, 0, 0, 0, 0, 0, 0, 4, 0, 3, 4, 1, 0, 0, 0, 0, 0, 0x61, 5, 0, 0, 1, 0, 1})
		var got []relay.RFBRecord
		hdr, valid, last, err := relay.ReadRFBRecording(bytes.NewReader(buf.Bytes()), func(rec relay.RFBRecord) error {
			got = append(got, rec)
			return nil
		})
		if err != nil || valid != int64(buf.Len()) || hdr.Version != 1 || hdr.Input {
			t.Fatalf("ReadRFBRecording = %+v, %d, %v; want version 1 without input, all %d bytes valid", hdr, valid, err, buf.Len())
		}
		if len(got) != 7 || last != 70*time.Millisecond {
			t.Fatalf("records = %d, last at %v; want 7, the last at 70ms", len(got), last)
		}
		if g := got[6]; g.Dir != relay.RFBClient || !bytes.Equal(g.Data, []byte{3, 0, 0, 0, 0, 0, 0, 4, 0, 3}) {
			t.Errorf("last record = %c %v; want the client's update request alone", g.Dir, g.Data)
		}
		if g := got[0]; g.Dir != relay.RFBServer || string(g.Data) != "RFB 003.008\n" || g.At != 10*time.Millisecond {
			t.Errorf("first record = %c %q at %v; want the server's version at 10ms", g.Dir, g.Data, g.At)
		}

		// Cut short in the middle of the last record: valid up to the one before.
		cut := buf.Bytes()[:buf.Len()-3]
		n := 0
		_, valid, _, err = relay.ReadRFBRecording(bytes.NewReader(cut), func(relay.RFBRecord) error { n++; return nil })
		if err != nil || n != 6 || valid != int64(buf.Len()-9-10) {
			t.Errorf("cut short: %d records, %d valid, %v; want 6, %d, nil", n, valid, err, buf.Len()-19)
		}
	})

	t.Run("Input", func(t *testing.T) {
		var buf bytes.Buffer
		r, _ := relay.NewRFBRecorder(&buf, relay.RFBRecordConfig{Input: true})
		r.Input([]byte("RFB 003.008\n\x01\x01\x04\x01\x00\x00\x00\x00\x00\x61"))
		var data []byte
		hdr, _, _, err := relay.ReadRFBRecording(&buf, func(rec relay.RFBRecord) error { data = append(data, rec.Data...); return nil })
		if err != nil || !hdr.Input || len(data) != 22 {
			t.Errorf("with input: header %+v, %d client bytes, %v; want input true and all 22", hdr, len(data), err)
		}
	})

	t.Run("Malformed", func(t *testing.T) {
		var good bytes.Buffer
		relay.NewRFBRecorder(&good, relay.RFBRecordConfig{})
		head := good.Bytes()
		for _, tc := range []struct {
			name string
			in   []byte
		}{
			{"NotARecording", []byte("{\"version\": 2}\n")},
			{"WrongMagic", append([]byte("CORRAL-RFB 9\n"), head[13:]...)},
			{"HugeHeader", []byte("CORRAL-RFB 1\n\xff\xff\xff\xff")},
			{"BadHeader", []byte("CORRAL-RFB 1\n\x00\x00\x00\x02{}")},
			{"UnknownDirection", append(append([]byte{}, head...), 'X', 0, 0, 0, 0, 0, 0, 0, 1, 0)},
			{"HugeRecord", append(append([]byte{}, head...), 'S', 0, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff)},
		} {
			t.Run(tc.name, func(t *testing.T) {
				if _, _, _, err := relay.ReadRFBRecording(bytes.NewReader(tc.in), nil); err == nil {
					t.Errorf("ReadRFBRecording(%q) = nil; want an error", tc.in)
				}
			})
		}
	})
}

// failingRecorder records nothing and fails its Output after ok calls.
type failingRecorder struct {
	mu      sync.Mutex
	ok      int
	resizes []relay.Resize
}

func (f *failingRecorder) Output(p []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ok == 0 {
		return errors.New("recordings reached their size cap")
	}
	f.ok--
	return nil
}
func (f *failingRecorder) Input(p []byte) error { return nil }
func (f *failingRecorder) Resize(r relay.Resize) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.resizes = append(f.resizes, r)
	return nil
}

func TestPipe_Recorder(t *testing.T) {
	t.Run("Terminal", func(t *testing.T) {
		var buf testlog.Buffer
		a, _ := relay.NewAsciicastRecorder(&buf, relay.AsciicastConfig{Input: true})
		h := MustHarness(t, "tcp", relay.Options{Recorder: a, Control: relay.TerminalControl(struct{}{})})
		ws, desk := h.MustConnect(t)
		ws.WriteMessage(websocket.TextMessage, relay.ResizeMessage(relay.Resize{Cols: 100, Rows: 30}))
		ws.WriteMessage(websocket.TextMessage, []byte("echo hi\r"))
		got := make([]byte, 8)
		desk.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadFull(desk, got); err != nil || string(got) != "echo hi\r" {
			t.Fatalf("desktop read %q, %v; want the keystrokes", got, err)
		}
		desk.Write([]byte("hi\r\n"))
		if _, p, err := ws.ReadMessage(); err != nil || string(p) != "hi\r\n" {
			t.Fatalf("client read %q, %v; want the output", p, err)
		}
		ws.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""))
		readEOF(t, desk)
		h.MustResult(t)
		ws.Close()
		desk.Close()
		_, evs := events(t, buf.String())
		var kinds []string
		for _, e := range evs {
			kinds = append(kinds, e[1].(string)+":"+e[2].(string))
		}
		if got, want := strings.Join(kinds, " "), "r:100x30 i:echo hi\r o:hi\r\n"; got != want {
			t.Errorf("events %q; want %q", got, want)
		}
	})

	t.Run("ErrRecording", func(t *testing.T) {
		rec := &failingRecorder{ok: 1}
		h := MustHarness(t, "tcp", relay.Options{Recorder: rec})
		ws, desk := h.MustConnect(t)
		defer desk.Close()
		defer ws.Close()
		desk.Write([]byte("first"))
		if _, p, err := ws.ReadMessage(); err != nil || string(p) != "first" {
			t.Fatalf("client read %q, %v; want the recorded output", p, err)
		}
		desk.Write([]byte("unrecorded"))
		ce := readClose(t, ws) // the unrecorded bytes never reach the client
		if ce.Code != websocket.CloseGoingAway || !strings.Contains(ce.Text, "recording") || !strings.Contains(ce.Text, "size cap") {
			t.Errorf("close = %d %q; want 1001 naming the recording's failure", ce.Code, ce.Text)
		}
		r := h.MustResult(t)
		if !errors.Is(r.err, relay.ErrRecording) || r.stats.BytesOut != 5 {
			t.Errorf("Pipe = %+v, %v; want ErrRecording after 5 bytes out", r.stats, r.err)
		}
	})
}
