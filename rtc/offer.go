package rtc

import (
	"strings"

	"github.com/pion/sdp/v3"
)

// maxOffer bounds an offer's SDP: a browser's video-only offer is 2–6 KiB.
const maxOffer = 32 << 10

// OfferError is an offer refused for what it asks; Why says what, for
// the page (which then goes on without WebRTC).
type OfferError struct{ Why string }

func (e *OfferError) Error() string { return "rtc: the offer is refused: " + e.Why }

// checkOffer returns offer without its candidates, or an OfferError when
// it asks for anything but to receive one video stream: no data channel
// (input stays on the websocket, where a view-only viewer's is dropped),
// no audio, nothing sent to the portal.
func checkOffer(offer string) (string, error) {
	if len(offer) > maxOffer {
		return "", &OfferError{Why: "it is longer than 32 KiB"}
	}
	var d sdp.SessionDescription
	if err := d.UnmarshalString(offer); err != nil {
		return "", &OfferError{Why: "it is not SDP: " + err.Error()}
	}
	if len(d.MediaDescriptions) != 1 {
		return "", &OfferError{Why: "it asks for more than the screen's one video stream"}
	}
	m := d.MediaDescriptions[0]
	if m.MediaName.Media != "video" {
		return "", &OfferError{Why: "it asks for " + m.MediaName.Media + ", not the screen's video"}
	}
	if _, ok := m.Attribute("recvonly"); !ok {
		return "", &OfferError{Why: "it must only receive the screen's video (recvonly)"}
	}
	keep := func(as []sdp.Attribute) []sdp.Attribute {
		out := as[:0]
		for _, a := range as {
			if a.Key != "candidate" && a.Key != "end-of-candidates" {
				out = append(out, a)
			}
		}
		return out
	}
	d.Attributes = keep(d.Attributes)
	m.Attributes = keep(m.Attributes)
	// The connection line's address is where a full agent might send:
	// never used by a lite one, and made plain here.
	if m.ConnectionInformation != nil && m.ConnectionInformation.Address != nil {
		m.ConnectionInformation.Address.Address = "0.0.0.0"
	}
	if d.ConnectionInformation != nil && d.ConnectionInformation.Address != nil {
		d.ConnectionInformation.Address.Address = "0.0.0.0"
	}
	b, err := d.Marshal()
	if err != nil {
		return "", &OfferError{Why: err.Error()}
	}
	if strings.Contains(string(b), "a=candidate") {
		return "", &OfferError{Why: "its candidates could not be taken out"}
	}
	return string(b), nil
}
