package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"

	"github.com/corral-dev/corral-vdi-portal/rfb"
	"github.com/corral-dev/corral-vdi-portal/rtc"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// noTap is a screen viewer whose video is never tapped in these tests.
type noTap struct{}

func (noTap) VideoTo(rfb.VideoSink) (func(), func(), error) { return func() {}, func() {}, nil }

// endingSink is a WebRTC track as a tap sees it: it takes no video and
// notes why its video ended.
type endingSink struct{ ended error }

func (*endingSink) Video([]byte, bool, int, int) bool { return false }
func (s *endingSink) VideoEnded(err error)            { s.ended = err }

// TestRecordedSink_TellsTheTrack: a recorded console's track whose video
// ends by itself (a video link from the screen's replica that could not
// be dialed again) is told, through the sink that records it.
func TestRecordedSink_TellsTheTrack(t *testing.T) {
	track := &endingSink{}
	broke := errors.New("the video link broke")
	var sink rfb.VideoSink = recordedSink{VideoSink: track}
	ender, ok := sink.(rfb.VideoEnder)
	if !ok {
		t.Fatal("a recorded console's sink is no rfb.VideoEnder: its track is never told its video ended")
	}
	ender.VideoEnded(broke)
	if track.ended != broke {
		t.Errorf("the track was told %v; want %v", track.ended, broke)
	}
}

// TestRTCSignal_Refusals: a VNC console's signalling answers what it
// cannot do in words the page shows, and never makes a peer then: WebRTC
// off, a recorded desktop whose stream the video cannot join, a
// screen with no video to tap (a relayed screen's is the owner's, over
// a video link: console.Screens), a message
// that is not JSON or not known, an offer that asks for a data channel
// (input goes by the websocket, where a view-only viewer's is dropped),
// and a second offer within a second.
func TestRTCSignal_Refusals(t *testing.T) {
	udp, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer udp.Close()
	srv, err := rtc.New(rtc.Config{UDP: udp})
	if err != nil {
		t.Fatal(err)
	}
	ref := vdi.Ref{Namespace: "local", Name: "d-1"}
	newSignal := func(srv *rtc.Server, conn any, recorded bool) *rtcSignal {
		h := &Handler{guard: &guard{renderer: &renderer{log: slog.New(slog.DiscardHandler)}}, console: &consoleState{cfg: ConsoleConfig{RTC: srv}}}
		return h.newRTCSignal(context.Background(), ref, conn, recorded, nil)
	}
	ask := func(s *rtcSignal, msg string) rtcMessage {
		t.Helper()
		var got []rtcMessage
		s.text([]byte(msg), func(b []byte) error {
			var m rtcMessage
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatalf("a reply that is not JSON: %q", b)
			}
			got = append(got, m)
			return nil
		})
		if len(got) != 1 {
			t.Fatalf("%d replies to %.40q; want 1", len(got), msg)
		}
		return got[0]
	}
	const dataChannelOffer = "v=0\r\no=- 1 2 IN IP4 127.0.0.1\r\ns=-\r\nt=0 0\r\na=group:BUNDLE 0 1\r\n" +
		"m=video 9 UDP/TLS/RTP/SAVPF 102\r\nc=IN IP4 0.0.0.0\r\na=mid:0\r\na=recvonly\r\na=rtpmap:102 H264/90000\r\n" +
		"m=application 9 UDP/DTLS/SCTP webrtc-datachannel\r\nc=IN IP4 0.0.0.0\r\na=mid:1\r\na=sctp-port:5000\r\n"
	for _, tc := range []struct {
		name     string
		s        *rtcSignal
		msg      string
		want     string
		wantSays string
	}{
		{"Off", newSignal(nil, noTap{}, false), `{"rtc":"offer","sdp":"v=0"}`, "refused", "WebRTC is off"},
		{"Recorded", newSignal(srv, noTap{}, true), `{"rtc":"offer","sdp":"v=0"}`, "refused", "recorded"},
		{"NoVideoToTap", newSignal(srv, struct{ net.Conn }{}, false), `{"rtc":"offer","sdp":"v=0"}`, "refused", "no video to send by WebRTC"},
		{"NotJSON", newSignal(srv, noTap{}, false), `offer`, "refused", "JSON"},
		{"UnknownMessage", newSignal(srv, noTap{}, false), `{"rtc":"candidate","sdp":"a=candidate:1 1 udp 1 10.0.0.9 9 typ host"}`, "refused", `not "candidate"`},
		{"DataChannelForInput", newSignal(srv, noTap{}, false), `{"rtc":"offer","sdp":` + jsonString(dataChannelOffer) + `}`, "refused", "more than the screen's one video"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := ask(tc.s, tc.msg)
			if m.RTC != tc.want || !strings.Contains(m.Error, tc.wantSays) {
				t.Errorf("reply %+v; want %s saying %q", m, tc.want, tc.wantSays)
			}
			if tc.s.peer != nil {
				t.Error("a peer was made")
			}
		})
	}
	t.Run("OneOfferASecond", func(t *testing.T) {
		s := newSignal(srv, noTap{}, false)
		ask(s, `{"rtc":"offer","id":7,"sdp":"v=0"}`)
		if m := ask(s, `{"rtc":"offer","id":8,"sdp":"v=0"}`); m.RTC != "refused" || !strings.Contains(m.Error, "One offer a second") || m.ID != 8 {
			t.Errorf("a second offer at once: %+v; want refused, one a second, with its id (8)", m)
		}
	})
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
