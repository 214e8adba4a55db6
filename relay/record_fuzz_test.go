package relay_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/relay"
)

// FuzzAsciicastRecorder feeds arbitrary output and input bytes, split at
// an arbitrary point: every line written must be JSON, and the file must
// scan as valid to its end.
func FuzzAsciicastRecorder(f *testing.F) {
	f.Add([]byte("hello\r\n"), []byte("ls\r"), 3)
	f.Add([]byte("caf\xc3\xa9 \xff\xfe"), []byte("\xe2\x82"), 4)
	f.Fuzz(func(t *testing.T, out, in []byte, cut int) {
		var buf bytes.Buffer
		a, err := relay.NewAsciicastRecorder(&buf, relay.AsciicastConfig{Input: true, Now: fakeClock(time.Millisecond)})
		if err != nil {
			t.Fatal(err)
		}
		cut = min(max(cut, 0), len(out))
		a.Output(out[:cut])
		a.Input(in)
		a.Output(out[cut:])
		a.Close()
		for _, line := range strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n") {
			if !json.Valid([]byte(line)) {
				t.Fatalf("line %q is not JSON", line)
			}
		}
		valid, _, err := relay.ScanAsciicast(bytes.NewReader(buf.Bytes()))
		if err != nil || valid != int64(buf.Len()) {
			t.Errorf("ScanAsciicast = %d, %v; want all %d bytes valid", valid, err, buf.Len())
		}
	})
}

// FuzzReadRFBRecording reads arbitrary bytes as an RFB recording: it
// never panics, and a valid prefix never runs past the input.
func FuzzReadRFBRecording(f *testing.F) {
	var good bytes.Buffer
	r, _ := relay.NewRFBRecorder(&good, relay.RFBRecordConfig{})
	r.Output([]byte("RFB 003.008\n"))
	r.Input([]byte("RFB 003.008\n\x01\x01"))
	f.Add(good.Bytes())
	f.Add([]byte("CORRAL-RFB 1\n\x00\x00\x00\x02{}"))
	f.Fuzz(func(t *testing.T, in []byte) {
		_, valid, _, _ := relay.ReadRFBRecording(bytes.NewReader(in), func(relay.RFBRecord) error { return nil })
		if valid > int64(len(in)) || valid < 0 {
			t.Errorf("valid prefix %d of %d bytes", valid, len(in))
		}
	})
}
