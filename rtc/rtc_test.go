package rtc

import (
	"context"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/pion/rtp/codecs"
	"github.com/pion/webrtc/v4"

	"github.com/corral-dev/corral-vdi-portal/rfb"
)

// newServer returns a Server on a UDP port of 127.0.0.1, with ICE-TCP
// on a TCP port there too when tcp is set.
func newServer(t *testing.T, tcp ...bool) *Server {
	t.Helper()
	udp, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { udp.Close() })
	cfg := Config{UDP: udp}
	if len(tcp) > 0 && tcp[0] {
		ln, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		cfg.TCP = ln
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// browser is a full ICE agent receiving one video stream, as a page's
// RTCPeerConnection with a recvonly transceiver.
type browser struct {
	pc  *webrtc.PeerConnection
	got chan packet
}

// packet is one RTP packet as the browser got it.
type packet struct {
	nal   []byte // its H.264, depacketized
	stamp uint32 // its RTP timestamp
}

func newBrowser(t *testing.T, nets ...webrtc.NetworkType) *browser {
	t.Helper()
	var se webrtc.SettingEngine
	se.SetIncludeLoopbackCandidate(true)
	if len(nets) > 0 {
		se.SetNetworkTypes(nets)
	}
	me := new(webrtc.MediaEngine)
	if err := me.RegisterDefaultCodecs(); err != nil {
		t.Fatal(err)
	}
	pc, err := webrtc.NewAPI(webrtc.WithSettingEngine(se), webrtc.WithMediaEngine(me)).NewPeerConnection(webrtc.Configuration{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	b := &browser{pc: pc, got: make(chan packet, 1000)}
	if _, err := pc.AddTransceiverFromKind(webrtc.RTPCodecTypeVideo, webrtc.RTPTransceiverInit{Direction: webrtc.RTPTransceiverDirectionRecvonly}); err != nil {
		t.Fatal(err)
	}
	pc.OnTrack(func(tr *webrtc.TrackRemote, _ *webrtc.RTPReceiver) {
		var h codecs.H264Packet
		for {
			pkt, _, err := tr.ReadRTP()
			if err != nil {
				return
			}
			if nal, err := h.Unmarshal(pkt.Payload); err == nil && len(nal) > 0 {
				select {
				case b.got <- packet{nal, pkt.Timestamp}:
				default:
				}
			}
		}
	})
	return b
}

// offer returns the browser's offer with its candidates gathered.
func (b *browser) offer(t *testing.T) string {
	t.Helper()
	o, err := b.pc.CreateOffer(nil)
	if err != nil {
		t.Fatal(err)
	}
	done := webrtc.GatheringCompletePromise(b.pc)
	if err := b.pc.SetLocalDescription(o); err != nil {
		t.Fatal(err)
	}
	<-done
	return b.pc.LocalDescription().SDP
}

func (b *browser) answer(t *testing.T, sdp string) {
	t.Helper()
	if err := b.pc.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeAnswer, SDP: sdp}); err != nil {
		t.Fatal(err)
	}
}

// screenTap is a hub's viewer as VideoTap sees it: once tapped, it sends
// a key frame and then a frame every 33 ms (after frame restAfter, if
// set, it rests for rest), each slice marked with its number; keyFrame
// counts the key frames asked for.
type screenTap struct {
	mu        sync.Mutex
	tapped    chan struct{}
	sink      rfb.VideoSink
	stops     int
	keys      int
	restAfter int
	rest      time.Duration
}

var (
	sps = []byte{0, 0, 0, 1, 0x67, 0x42, 0xe0, 0x1f}
	pps = []byte{0, 0, 0, 1, 0x68, 0xce, 0x3c, 0x80}
)

func (s *screenTap) VideoTo(sink rfb.VideoSink) (stop, keyFrame func(), err error) {
	done := make(chan struct{})
	go func() {
		for i := 0; ; i++ {
			au := []byte{0, 0, 0, 1, 0x41, 0x9a, byte(i)}
			if i == 0 {
				au = append(append(append([]byte{}, sps...), pps...), 0, 0, 0, 1, 0x65, 0x88, 0)
			}
			sink.Video(au, i == 0, 64, 48)
			wait := 33 * time.Millisecond
			if i > 0 && i == s.restAfter {
				wait = s.rest
			}
			select {
			case <-done:
				return
			case <-time.After(wait):
			}
		}
	}()
	s.mu.Lock()
	s.sink = sink
	s.mu.Unlock()
	close(s.tapped)
	var once sync.Once
	return func() {
			once.Do(func() { close(done) })
			s.mu.Lock()
			s.stops++
			s.mu.Unlock()
		}, func() {
			s.mu.Lock()
			s.keys++
			s.mu.Unlock()
		}, nil
}

// TestAnswer_SendsTheScreen: a browser's recvonly offer is answered with
// the portal's configured candidate only, the browser reaches the
// portal's one port, and the hub's access units arrive on the track; the
// tap is stopped when the peer closes. Each frame is stamped with when
// the hub gave it: the frame after a rest carries the rest in its stamp,
// and the one after it does not.
func TestAnswer_SendsTheScreen(t *testing.T) {
	s := newServer(t)
	b := newBrowser(t)
	const rest = 600 * time.Millisecond
	tap := &screenTap{tapped: make(chan struct{}), restAfter: 5, rest: rest}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	answer, p, err := s.Answer(ctx, b.offer(t), tap)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(answer, "a=ice-lite") {
		t.Errorf("the answer is not ICE-lite:\n%s", answer)
	}
	for _, l := range strings.Split(answer, "\n") {
		if strings.HasPrefix(l, "a=candidate") && !strings.Contains(l, " 127.0.0.1 ") {
			t.Errorf("the answer names a candidate beside the configured address: %s", l)
		}
	}
	b.answer(t, answer)
	select {
	case <-tap.tapped:
	case <-p.Done():
		t.Fatalf("the peer ended before the browser connected: %v", p.Err())
	case <-ctx.Done():
		t.Fatal("the browser never connected")
	}
	var idr, slices int
	stamps := map[byte]uint32{} // a slice's number -> its RTP timestamp
	for idr == 0 || slices < 7 {
		select {
		case pkt := <-b.got:
			switch nal := pkt.nal; nal[len(nal)-3] & 0x1f {
			case 5:
				idr++
			case 1:
				slices++
				stamps[nal[len(nal)-1]] = pkt.stamp
			}
		case <-ctx.Done():
			t.Fatalf("the track carried %d key frames and %d frames; want the screen's", idr, slices)
		}
	}
	ms := func(a, b byte) float64 { return float64(stamps[b]-stamps[a]) / 90 }
	if gap := ms(5, 6); gap < float64(rest.Milliseconds())*0.9 {
		t.Errorf("the frame after a %v rest is stamped %.0f ms after the one before; want the rest", rest, gap)
	}
	if gap := ms(6, 7); gap > float64(rest.Milliseconds())/2 {
		t.Errorf("the second frame after a %v rest is stamped %.0f ms after the first; want a frame's time (~33 ms)", rest, gap)
	}
	if p.Sent() == 0 {
		t.Error("Sent() = 0 after frames arrived")
	}
	p.Close()
	<-p.Done()
	tap.mu.Lock()
	defer tap.mu.Unlock()
	if tap.stops != 1 {
		t.Errorf("the tap was stopped %d times; want 1", tap.stops)
	}
}

// TestAnswer_ICETCP: a browser whose network drops UDP reaches the
// portal's ICE-TCP port, named in the answer beside the UDP one, and
// gets the video there. When the tap's video ends by itself (a video
// link from the screen's replica that could not be dialed again), the
// peer ends, saying why, and stops the tap.
func TestAnswer_ICETCP(t *testing.T) {
	s := newServer(t, true)
	b := newBrowser(t, webrtc.NetworkTypeTCP4)
	tap := &screenTap{tapped: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	answer, p, err := s.Answer(ctx, b.offer(t), tap)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if !strings.Contains(answer, " tcp ") || !strings.Contains(answer, "tcptype passive") {
		t.Fatalf("the answer names no passive TCP candidate:\n%s", answer)
	}
	b.answer(t, answer)
	for got := 0; got < 5; {
		select {
		case <-b.got:
			got++
		case <-p.Done():
			t.Fatalf("the peer ended: %v", p.Err())
		case <-ctx.Done():
			t.Fatal("no video over ICE-TCP")
		}
	}
	broke := errors.New("the video link broke")
	tap.mu.Lock()
	ender, ok := tap.sink.(rfb.VideoEnder)
	tap.mu.Unlock()
	if !ok {
		t.Fatal("the peer is no rfb.VideoEnder: its tap cannot tell it the video ended")
	}
	ender.VideoEnded(broke)
	select {
	case <-p.Done():
	case <-ctx.Done():
		t.Fatal("the tap's video ended and the peer did not")
	}
	if !errors.Is(p.Err(), broke) {
		t.Errorf("the peer ended with %v; want %v", p.Err(), broke)
	}
	tap.mu.Lock()
	defer tap.mu.Unlock()
	if tap.stops != 1 {
		t.Errorf("the tap was stopped %d times after its video ended; want 1", tap.stops)
	}
}

// TestAnswer_BrowserNeverConnects: a browser that never reaches the
// portal's port (its network drops the port, or it never took the
// answer) ends its peer, saying so, and the screen is never tapped: the
// console goes on with the websocket's video.
func TestAnswer_BrowserNeverConnects(t *testing.T) {
	defer func(d time.Duration) { connectTimeout = d }(connectTimeout)
	connectTimeout = 300 * time.Millisecond
	s := newServer(t)
	b := newBrowser(t)
	tap := &screenTap{tapped: make(chan struct{})}
	_, p, err := s.Answer(context.Background(), b.offer(t), tap) // the answer never reaches the browser
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the peer of a browser that never connected did not end")
	}
	if err := p.Err(); err == nil || !strings.Contains(err.Error(), "did not reach") {
		t.Errorf("the peer ended with %v; want that the browser did not reach the port", err)
	}
	select {
	case <-tap.tapped:
		t.Error("the screen was tapped for a browser that never connected")
	default:
	}
}

// TestAnswer_RefusesOffers: an offer that asks for more than the
// screen's video to receive is refused before any peer is made.
func TestAnswer_RefusesOffers(t *testing.T) {
	s := newServer(t)
	tap := &screenTap{tapped: make(chan struct{})}
	offerOf := func(setup func(pc *webrtc.PeerConnection)) string {
		pc, err := webrtc.NewPeerConnection(webrtc.Configuration{})
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close()
		setup(pc)
		o, err := pc.CreateOffer(nil)
		if err != nil {
			t.Fatal(err)
		}
		return o.SDP
	}
	recv := func(kind webrtc.RTPCodecType) func(*webrtc.PeerConnection) {
		return func(pc *webrtc.PeerConnection) {
			pc.AddTransceiverFromKind(kind, webrtc.RTPTransceiverInit{Direction: webrtc.RTPTransceiverDirectionRecvonly})
		}
	}
	for _, tc := range []struct{ name, offer, want string }{
		{"NotSDP", "hello", "not SDP"},
		{"TooLong", strings.Repeat("a", maxOffer+1), "longer than"},
		{"DataChannelForInput", offerOf(func(pc *webrtc.PeerConnection) {
			recv(webrtc.RTPCodecTypeVideo)(pc)
			pc.CreateDataChannel("input", nil)
		}), "more than the screen's one video"},
		{"OnlyADataChannel", offerOf(func(pc *webrtc.PeerConnection) { pc.CreateDataChannel("input", nil) }), "application"},
		{"Audio", offerOf(recv(webrtc.RTPCodecTypeAudio)), "audio"},
		{"SendsToThePortal", offerOf(func(pc *webrtc.PeerConnection) {
			pc.AddTransceiverFromKind(webrtc.RTPCodecTypeVideo, webrtc.RTPTransceiverInit{Direction: webrtc.RTPTransceiverDirectionSendrecv})
		}), "recvonly"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := s.Answer(context.Background(), tc.offer, tap)
			var oe *OfferError
			if err == nil || !errors.As(err, &oe) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Answer = %v; want an OfferError saying %q", err, tc.want)
			}
		})
	}
}

// TestAnswer_NeverSendsToOfferedCandidates: an offer naming another
// host's address as its candidate (a UDP port the test owns) gets its
// video to the browser that connected, and not one packet reaches that
// address: the portal answers checks, it never starts them.
func TestAnswer_NeverSendsToOfferedCandidates(t *testing.T) {
	trap, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer trap.Close()
	trapped := make(chan int, 1)
	go func() {
		n := 0
		buf := make([]byte, 2048)
		for {
			if _, _, err := trap.ReadFrom(buf); err != nil {
				trapped <- n
				return
			}
			n++
		}
	}()
	s := newServer(t)
	b := newBrowser(t)
	offer := b.offer(t)
	port := trap.LocalAddr().(*net.UDPAddr).Port
	var forged []string
	for _, l := range strings.Split(offer, "\r\n") {
		if strings.HasPrefix(l, "a=candidate") {
			continue
		}
		forged = append(forged, l)
		if strings.HasPrefix(l, "a=mid:") {
			forged = append(forged, "a=candidate:1 1 udp 2130706431 127.0.0.1 "+strconv.Itoa(port)+" typ host",
				"a=candidate:2 1 udp 2130706431 10.99.0.1 "+strconv.Itoa(port)+" typ host")
		}
	}
	tap := &screenTap{tapped: make(chan struct{})}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	answer, p, err := s.Answer(ctx, strings.Join(forged, "\r\n"), tap)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if held := p.pc.RemoteDescription().SDP; strings.Contains(held, "10.99.0.1") || strings.Contains(held, " "+strconv.Itoa(port)+" ") {
		t.Errorf("the peer holds the offer's candidates:\n%s", held)
	}
	b.answer(t, answer)
	for got := 0; got < 10; {
		select {
		case <-b.got:
			got++
		case <-ctx.Done():
			t.Fatal("the browser got no video")
		}
	}
	trap.Close()
	if n := <-trapped; n != 0 {
		t.Errorf("the portal sent %d packets to the address the offer named; want none", n)
	}
}
