package relay

// An InputDetector reads the client-to-desktop byte stream of one console
// connection and reports whether a chunk carried real user input (a key, a
// pointer move or click), as opposed to protocol chatter such as RFB's
// constant FramebufferUpdateRequests. Idle reclaim trusts only this signal.
type InputDetector interface {
	// Feed consumes the next chunk of the stream; messages may span chunks.
	Feed(p []byte) (input bool)
}

// NewInputDetector returns the detector for a console protocol: "vnc",
// "rdp", "serial" or "terminal". Unknown protocols report no input.
func NewInputDetector(protocol string) InputDetector {
	switch protocol {
	case "vnc":
		return new(RFBInput)
	case "rdp":
		return new(RDPInput)
	case "serial", "terminal":
		return keystrokes{}
	}
	return nothing{}
}

// keystrokes reports every client byte of a serial console or terminal as
// input: a client sends bytes only when someone types or pastes.
type keystrokes struct{}

func (keystrokes) Feed(p []byte) bool { return len(p) > 0 }

type nothing struct{}

func (nothing) Feed([]byte) bool { return false }
