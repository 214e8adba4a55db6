package rtc

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/pion/rtcp"
	"github.com/pion/rtp"
	"github.com/pion/rtp/codecs"
	"github.com/pion/webrtc/v4"

	"github.com/corral-dev/corral-vdi-portal/rfb"
)

// Bounds of a peer.
const (
	// gatherTimeout bounds the portal's own candidates (its ports: at once).
	gatherTimeout = 5 * time.Second
	// queuedFrames bounds the access units waiting to be sent: past it the
	// viewer waits for a key frame (the hub makes one at most a second).
	queuedFrames = 30
	// packetSize bounds an RTP packet, as pion's own sample tracks do.
	packetSize = 1200
	// clockRate is H.264's RTP clock (RFC 6184).
	clockRate = 90000
)

// connectTimeout is how long a browser has to reach the portal's port
// after the answer; a peer that does not is ended (the page goes on with
// the websocket's video). A variable: a test shortens it.
var connectTimeout = 15 * time.Second

// frame is one access unit waiting for the track.
type frame struct {
	au  []byte
	key bool
	at  time.Time // when the hub gave it
}

// Peer is one browser's video track. Its end is told once, by Done.
type Peer struct {
	pc     *webrtc.PeerConnection
	track  *webrtc.TrackLocalStaticRTP
	frames chan frame
	done   chan struct{}
	once   sync.Once
	why    error // why it ended, set before done closes

	mu       sync.Mutex
	stop     func() // the hub's tap, once connected
	keyFrame func()
	sent     int // access units written to the track
}

var (
	_ rfb.VideoSink  = (*Peer)(nil)
	_ rfb.VideoEnder = (*Peer)(nil)
)

// Answer answers offer, the browser's SDP, with a peer that sends tap's
// video once the browser reaches the portal's port. The offer must ask
// to receive one video stream and nothing else; its candidates, and any
// the browser sends later, are dropped (the portal is ICE-lite: it only
// answers the checks that reach it).
func (s *Server) Answer(ctx context.Context, offer string, tap rfb.VideoTap) (answer string, _ *Peer, err error) {
	clean, err := checkOffer(offer)
	if err != nil {
		return "", nil, err
	}
	pc, err := s.api.NewPeerConnection(webrtc.Configuration{})
	if err != nil {
		return "", nil, fmt.Errorf("rtc: a peer: %w", err)
	}
	p := &Peer{pc: pc, frames: make(chan frame, queuedFrames), done: make(chan struct{})}
	defer func() {
		if err != nil {
			p.end(err)
		}
	}()
	p.track, err = webrtc.NewTrackLocalStaticRTP(h264Codec.RTPCodecCapability, "screen", "desktop")
	if err != nil {
		return "", nil, err
	}
	sender, err := pc.AddTrack(p.track)
	if err != nil {
		return "", nil, err
	}
	if err := pc.SetRemoteDescription(webrtc.SessionDescription{Type: webrtc.SDPTypeOffer, SDP: clean}); err != nil {
		return "", nil, &OfferError{Why: "it could not be read: " + err.Error()}
	}
	a, err := pc.CreateAnswer(nil)
	if err != nil {
		return "", nil, &OfferError{Why: "it could not be answered: " + err.Error()}
	}
	gathered := webrtc.GatheringCompletePromise(pc)
	if err := pc.SetLocalDescription(a); err != nil {
		return "", nil, err
	}
	select {
	case <-gathered:
	case <-ctx.Done():
		return "", nil, ctx.Err()
	case <-time.After(gatherTimeout):
		return "", nil, errors.New("rtc: the portal's candidates were not gathered in time")
	}
	connected := make(chan struct{})
	var connOnce sync.Once
	pc.OnConnectionStateChange(func(st webrtc.PeerConnectionState) {
		switch st {
		case webrtc.PeerConnectionStateConnected:
			connOnce.Do(func() { close(connected) })
		case webrtc.PeerConnectionStateFailed, webrtc.PeerConnectionStateClosed:
			p.end(fmt.Errorf("rtc: the browser's connection %s", st))
		}
	})
	go p.rtcp(sender)
	go p.run(tap, connected, connectTimeout)
	return pc.LocalDescription().SDP, p, nil
}

// run starts tap's video once the browser is connected (within wait) and
// writes it to the track until the peer ends.
func (p *Peer) run(tap rfb.VideoTap, connected <-chan struct{}, wait time.Duration) {
	select {
	case <-connected:
	case <-p.done:
		return
	case <-time.After(wait):
		p.end(errors.New("rtc: the browser did not reach the portal's port"))
		return
	}
	stop, key, err := tap.VideoTo(p)
	if err != nil {
		p.end(err)
		return
	}
	p.mu.Lock()
	p.stop, p.keyFrame = stop, key
	p.mu.Unlock()
	select {
	case <-p.done: // ended meanwhile: end did not see stop
		stop()
		return
	default:
	}
	// Each access unit is stamped with when the hub gave it (RFC 6184: the
	// sampling instant, in a 90 kHz clock), so the browser plays a frame
	// after a rest at once. (pion's sample track stamps a frame with the
	// previous frames' durations: a frame after a rest went out stamped as
	// if no time had passed, and the rest landed on the next frame.)
	pk := rtp.NewPacketizerWithOptions(packetSize, &codecs.H264Payloader{}, rtp.NewRandomSequencer(), clockRate)
	var start time.Time
	var at uint32 // the last frame's stamp, in ticks from start (wrapping as RTP's do)
	for {
		select {
		case <-p.done:
			return
		case f := <-p.frames:
			if start.IsZero() {
				start = f.at
			}
			next := ticks(f.at.Sub(start))
			pk.SkipSamples(next - at)
			at = next
			for _, pkt := range pk.Packetize(f.au, 0) {
				if err := p.track.WriteRTP(pkt); err != nil {
					p.end(fmt.Errorf("rtc: the track: %w", err))
					return
				}
			}
			p.mu.Lock()
			p.sent++
			p.mu.Unlock()
		}
	}
}

// ticks is d in H.264's RTP clock, modulo 2³² as RTP stamps are.
func ticks(d time.Duration) uint32 { return uint32(int64(d.Seconds() * clockRate)) }

// rtcp reads the browser's reports, asking the hub for a key frame when
// the browser's decoder lost one (PLI, FIR).
func (p *Peer) rtcp(sender *webrtc.RTPSender) {
	for {
		pkts, _, err := sender.ReadRTCP()
		if err != nil {
			return
		}
		for _, pkt := range pkts {
			switch pkt.(type) {
			case *rtcp.PictureLossIndication, *rtcp.FullIntraRequest:
				p.mu.Lock()
				key := p.keyFrame
				p.mu.Unlock()
				if key != nil {
					key()
				}
			}
		}
	}
}

// Video implements rfb.VideoSink: it queues au for the track, or reports
// false when the track is that far behind.
func (p *Peer) Video(au []byte, key bool, w, h int) bool {
	select {
	case p.frames <- frame{au, key, time.Now()}:
		return true
	default:
		return false
	}
}

// VideoEnded implements rfb.VideoEnder: the peer ends, for err.
func (p *Peer) VideoEnded(err error) { p.end(err) }

// Sent returns how many access units went to the track.
func (p *Peer) Sent() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sent
}

// Done is closed when the peer ended; Err then says why.
func (p *Peer) Done() <-chan struct{} { return p.done }

// Err returns why the peer ended (nil while it runs).
func (p *Peer) Err() error {
	select {
	case <-p.done:
		return p.why
	default:
		return nil
	}
}

// Close ends the peer: the viewer's video goes back to its websocket.
func (p *Peer) Close() { p.end(errors.New("rtc: closed")) }

// end ends the peer once, for why.
func (p *Peer) end(why error) {
	p.once.Do(func() {
		p.why = why
		close(p.done)
		p.mu.Lock()
		stop := p.stop
		p.mu.Unlock()
		if stop != nil {
			stop()
		}
		go p.pc.Close() // it waits on its own callbacks, which may call end
	})
}
