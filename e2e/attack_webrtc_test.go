package e2e

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/pion/webrtc/v4"
)

// rtcEnv is the arena of the WebRTC rows: H.264 and the WebRTC path on.
var rtcEnv = []string{"CORRAL_VDI_H264=gst-launch-1.0", "CORRAL_VDI_WEBRTC_UDP=127.0.0.1:0"}

// webrtcAttacks are the attack table's rows on the WebRTC video path
// (#56): its offers ride on a console's websocket, already authorized for
// one desktop and role, and may ask for the screen's video only.
func webrtcAttacks() []attack {
	// offer opens user's VNC console of the victim's desktop, sends sdp as
	// an offer and returns the portal's reply as the response's body
	// (the status is the upgrade's, 101).
	offer := func(user, sdp string) func(t *testing.T, a *arena) *http.Response {
		return func(t *testing.T, a *arena) *http.Response {
			h := http.Header{"Tailscale-User-Login": {user}, "Origin": {"http://" + a.host}}
			ws, res, err := websocket.DefaultDialer.Dial("ws://"+a.host+"/ws/vnc/local/"+a.victim, h)
			if err != nil {
				return res
			}
			defer ws.Close()
			msg, _ := json.Marshal(map[string]string{"rtc": "offer", "sdp": sdp})
			must(t, ws.WriteMessage(websocket.TextMessage, msg))
			ws.SetReadDeadline(time.Now().Add(30 * time.Second))
			for {
				mt, b, err := ws.ReadMessage()
				if err != nil {
					t.Fatalf("no answer to the offer: %v", err)
				}
				if mt == websocket.TextMessage {
					res.Body = io.NopCloser(strings.NewReader(string(b)))
					return res
				}
			}
		}
	}
	// A data channel beside the video: what input over WebRTC would ride.
	const dataChannel = "v=0\r\no=- 1 2 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\na=group:BUNDLE 0 1\r\n" +
		"m=video 9 UDP/TLS/RTP/SAVPF 102\r\nc=IN IP4 0.0.0.0\r\na=mid:0\r\na=recvonly\r\na=rtpmap:102 H264/90000\r\n" +
		"m=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\nc=IN IP4 0.0.0.0\r\na=mid:1\r\na=sctp-port:5000\r\n"
	return []attack{
		{
			// carol, invited to watch alice's desktop (view only), offers
			// a data channel for input: the video is all an offer gets,
			// and her input stays on the websocket, where it is dropped.
			name: "ViewOnlyInviteeOffersADataChannelForInput",
			env:  rtcEnv,
			setup: func(t *testing.T, a *arena) {
				if code := a.p.APIBody(t, "alice", "POST", "/api/vdi/desktops/local/"+a.victim+"/shares", `{"user":"carol"}`, nil); code != 201 {
					t.Fatalf("alice invites carol: %d", code)
				}
			},
			attack:   offer("carol", dataChannel),
			status:   101,
			says:     "more than the screen's one video",
			consoles: 1,
		},
		{
			// alice's own console offers a real browser's video offer
			// whose candidates and connection line name another host's
			// port (here the test's trap), to make the portal send the
			// screen there: a stream to a third party, or a flood
			// reflected off the portal. The answer names the portal's
			// own candidates only, and the port named gets not a packet
			// (a full ICE agent sends its checks there at once).
			name: "OfferNamesAnotherHostForTheMedia",
			env:  rtcEnv,
			setup: func(t *testing.T, a *arena) {
				trap, err := net.ListenPacket("udp4", "127.0.0.1:0")
				must(t, err)
				t.Cleanup(func() { trap.Close() })
				a.state["rtc-trap"] = trap
			},
			attack: func(t *testing.T, a *arena) *http.Response {
				trap := a.state["rtc-trap"].(net.PacketConn)
				return offer("alice", forgedOffer(t, trap.LocalAddr().(*net.UDPAddr).Port))(t, a)
			},
			status:   101,
			says:     `"answer"`,
			consoles: 1,
			after: func(t *testing.T, a *arena, _ *http.Response, body string) {
				trap := a.state["rtc-trap"].(net.PacketConn)
				port := strconv.Itoa(trap.LocalAddr().(*net.UDPAddr).Port)
				if strings.Contains(body, " "+port+" ") {
					t.Errorf("the answer names the trap's port %s:\n%s", port, body)
				}
				trap.SetReadDeadline(time.Now().Add(3 * time.Second))
				if n, from, err := trap.ReadFrom(make([]byte, 2048)); err == nil {
					t.Errorf("the portal sent %d bytes from %v to the port the offer named; want none", n, from)
				}
			},
		},
		{
			// alice's own console offers to send the portal media (a
			// camera, a stream the portal would take in): refused.
			name: "OfferSendsMediaToThePortal",
			env:  rtcEnv,
			attack: offer("alice", "v=0\r\no=- 1 2 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\n"+
				"m=video 9 UDP/TLS/RTP/SAVPF 102\r\nc=IN IP4 0.0.0.0\r\na=mid:0\r\na=sendrecv\r\na=rtpmap:102 H264/90000\r\n"),
			status:   101,
			says:     "recvonly",
			consoles: 1,
		},
	}
}

// forgedOffer returns a browser's recvonly video offer (pion's, as a
// page's RTCPeerConnection makes it) with its candidates replaced by
// ones naming port on 127.0.0.1 and on a host elsewhere, and its
// connection line naming the first.
func forgedOffer(t *testing.T, port int) string {
	t.Helper()
	pc, err := webrtc.NewPeerConnection(webrtc.Configuration{})
	must(t, err)
	defer pc.Close()
	_, err = pc.AddTransceiverFromKind(webrtc.RTPCodecTypeVideo, webrtc.RTPTransceiverInit{Direction: webrtc.RTPTransceiverDirectionRecvonly})
	must(t, err)
	o, err := pc.CreateOffer(nil)
	must(t, err)
	must(t, pc.SetLocalDescription(o))
	var out []string
	for _, l := range strings.Split(o.SDP, "\r\n") {
		switch {
		case strings.HasPrefix(l, "a=candidate"), strings.HasPrefix(l, "a=end-of-candidates"):
			continue
		case strings.HasPrefix(l, "c=IN IP4 "):
			l = "c=IN IP4 127.0.0.1"
		}
		out = append(out, l)
		if strings.HasPrefix(l, "a=mid:") {
			p := strconv.Itoa(port)
			out = append(out, "a=candidate:1 1 udp 2130706431 127.0.0.1 "+p+" typ host",
				"a=candidate:2 1 udp 2130706431 10.99.0.1 "+p+" typ host")
		}
	}
	return strings.Join(out, "\r\n")
}
