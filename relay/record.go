package relay

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// A Recorder is given the traffic of one console connection as it crosses
// the relay (see Options.Recorder). Pipe hands it each chunk before passing
// the chunk on, so nothing reaches the client or the desktop unrecorded;
// when it fails, the relay ends with ErrRecording rather than go on
// unrecorded. Output and Input are called from different goroutines.
type Recorder interface {
	// Output records bytes from the desktop to the client.
	Output(p []byte) error
	// Input records bytes from the client to the desktop, after
	// Options.Filter.
	Input(p []byte) error
	// Resize records a terminal resize control message of the client.
	Resize(r Resize) error
}

// ErrRecording is what Pipe's error wraps when its Recorder failed and
// the session ended for it.
var ErrRecording = errors.New("the session ended: its recording could not be written")

// Recording formats, as the recording files and their metadata name them.
const (
	// FormatAsciicast is asciicast v2, for terminals and serial consoles.
	FormatAsciicast = "asciicast-v2"
	// FormatRFB is the portal's own RFB recording (see RFBRecorder).
	FormatRFB = "corral-rfb-v1"
)

// recordingFailure wraps a Recorder's error as Pipe returns it.
func recordingFailure(err error) error {
	return fmt.Errorf("%w: %w", ErrRecording, err)
}

// recordingReason is the close frame's reason for a failed recording, at
// most 123 bytes.
func recordingReason(err error) string {
	reason := recordingFailure(err).Error()
	if len(reason) > 123 {
		reason = strings.ToValidUTF8(reason[:120], "") + "..."
	}
	return reason
}

// clock returns now, or time.Now when now is nil.
func clock(now func() time.Time) func() time.Time {
	if now == nil {
		return time.Now
	}
	return now
}

// sticky remembers a recorder's first write error: after it, every call
// fails the same way and nothing more is written, so a recording never has
// a hole in the middle.
type sticky struct {
	mu  sync.Mutex
	err error
}

// do runs write under the lock unless an earlier write failed.
func (s *sticky) do(write func() error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	s.err = write()
	return s.err
}
