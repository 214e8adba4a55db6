package relay

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"
	"unicode/utf8"
)

// AsciicastConfig configures an AsciicastRecorder.
type AsciicastConfig struct {
	// Width and Height are the terminal's size until the client's first
	// resize; zero means 80x24.
	Width, Height int
	// Input records the client's keystrokes as "i" events; without it
	// only output and resizes are recorded.
	Input bool
	// Title goes into the header.
	Title string
	// Now returns the current time; nil means time.Now.
	Now func() time.Time
}

// AsciicastRecorder writes a terminal or serial console session as
// asciicast v2 (https://docs.asciinema.org/manual/asciicast/v2/): a JSON
// header line, then one JSON array per event, [seconds, code, data], with
// code "o" for output, "i" for input and "r" for a resize ("COLSxROWS").
// Every event is one Write of one complete line, so a file cut short by a
// crash or a full disk is a valid recording up to its last newline.
//
// Event data must be UTF-8 text: a multi-byte character split across
// chunks is held back until it is complete, and bytes that are not UTF-8
// are written as U+FFFD.
type AsciicastRecorder struct {
	w      io.Writer
	input  bool
	now    func() time.Time
	start  time.Time
	state  sticky
	out    []byte // an incomplete UTF-8 sequence at the end of the output
	in     []byte // the same for input
	events int
}

var _ Recorder = (*AsciicastRecorder)(nil)

// NewAsciicastRecorder writes the header to w and returns a recorder of
// the events that follow.
func NewAsciicastRecorder(w io.Writer, cfg AsciicastConfig) (*AsciicastRecorder, error) {
	a := &AsciicastRecorder{w: w, input: cfg.Input, now: clock(cfg.Now)}
	a.start = a.now()
	if cfg.Width <= 0 || cfg.Height <= 0 {
		cfg.Width, cfg.Height = 80, 24
	}
	hdr, _ := json.Marshal(struct {
		Version   int               `json:"version"`
		Width     int               `json:"width"`
		Height    int               `json:"height"`
		Timestamp int64             `json:"timestamp"`
		Title     string            `json:"title,omitempty"`
		Env       map[string]string `json:"env"`
	}{2, cfg.Width, cfg.Height, a.start.Unix(), cfg.Title, map[string]string{"TERM": "xterm-256color"}})
	if _, err := w.Write(append(hdr, '\n')); err != nil {
		return nil, fmt.Errorf("relay: write asciicast header: %w", err)
	}
	return a, nil
}

// Output implements Recorder.
func (a *AsciicastRecorder) Output(p []byte) error {
	return a.state.do(func() error { return a.text("o", &a.out, p) })
}

// Input implements Recorder; keystrokes are dropped unless the config
// asked for them.
func (a *AsciicastRecorder) Input(p []byte) error {
	if !a.input {
		return a.state.do(func() error { return nil })
	}
	return a.state.do(func() error { return a.text("i", &a.in, p) })
}

// Resize implements Recorder.
func (a *AsciicastRecorder) Resize(r Resize) error {
	return a.state.do(func() error {
		return a.event("r", strconv.Itoa(int(r.Cols))+"x"+strconv.Itoa(int(r.Rows)))
	})
}

// Close writes what is held back of an incomplete character. It does not
// close the underlying writer.
func (a *AsciicastRecorder) Close() error {
	return a.state.do(func() error {
		for _, e := range []struct {
			code string
			held *[]byte
		}{{"o", &a.out}, {"i", &a.in}} {
			if len(*e.held) > 0 {
				if err := a.event(e.code, string(*e.held)); err != nil {
					return err
				}
				*e.held = nil
			}
		}
		return nil
	})
}

// text writes p, after what was held back, as a text event of code,
// holding back a trailing incomplete UTF-8 sequence.
func (a *AsciicastRecorder) text(code string, held *[]byte, p []byte) error {
	data := append(*held, p...)
	cut := len(data)
	for i := len(data) - 1; i >= 0 && i >= len(data)-utf8.UTFMax+1; i-- {
		if utf8.RuneStart(data[i]) {
			if !utf8.FullRune(data[i:]) {
				cut = i
			}
			break
		}
	}
	*held = append([]byte(nil), data[cut:]...)
	if cut == 0 {
		return nil
	}
	return a.event(code, string(data[:cut]))
}

// event writes one event line.
func (a *AsciicastRecorder) event(code, data string) error {
	t := a.now().Sub(a.start).Seconds()
	d, _ := json.Marshal(data) // invalid UTF-8 becomes U+FFFD
	line := make([]byte, 0, len(d)+32)
	line = append(line, '[')
	line = strconv.AppendFloat(line, max(t, 0), 'f', 6, 64)
	line = append(line, `, "`...)
	line = append(line, code...)
	line = append(line, `", `...)
	line = append(line, d...)
	line = append(line, "]\n"...)
	if _, err := a.w.Write(line); err != nil {
		return err // the writer's words: the session's end reason
	}
	a.events++
	return nil
}

// ScanAsciicast reads an asciicast v2 recording, possibly cut short, and
// returns the length of its valid prefix (the header and every complete
// event line) and the time of its last event. A file without a valid
// header has no valid prefix.
func ScanAsciicast(r io.Reader) (valid int64, last time.Duration, err error) {
	br := bufio.NewReaderSize(r, 64<<10)
	for n := 0; ; n++ {
		line, err := br.ReadBytes('\n')
		if err == io.EOF {
			return valid, last, nil // an unterminated last line is not valid
		} else if err != nil {
			return valid, last, err
		}
		body := bytes.TrimSpace(line)
		if n == 0 {
			var hdr struct {
				Version int `json:"version"`
			}
			if json.Unmarshal(body, &hdr) != nil || hdr.Version != 2 {
				return 0, 0, nil
			}
		} else {
			var ev []json.RawMessage
			var t float64
			if json.Unmarshal(body, &ev) != nil || len(ev) != 3 || json.Unmarshal(ev[0], &t) != nil {
				return valid, last, nil
			}
			last = time.Duration(t * float64(time.Second))
		}
		valid += int64(len(line))
	}
}
