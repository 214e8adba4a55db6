package relay_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/corral-dev/corral-vdi-portal/relay"
)

// BenchmarkRelayOutRecorded is BenchmarkRelayOut with the session
// recorded in the corral-rfb-v1 format to a file, as a recorded VNC
// console is: its MB/s against BenchmarkRelayOut's is what recording costs
// the relay.
func BenchmarkRelayOutRecorded(b *testing.B) {
	f, err := os.Create(filepath.Join(b.TempDir(), "session.rfb"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	rec, err := relay.NewRFBRecorder(f, relay.RFBRecordConfig{})
	if err != nil {
		b.Fatal(err)
	}
	benchRelayOut(b, relay.Options{Recorder: rec})
}
