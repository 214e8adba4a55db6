package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/corral-dev/corral-vdi-portal/relay"
	"github.com/corral-dev/corral-vdi-portal/rfb"
	"github.com/corral-dev/corral-vdi-portal/rtc"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// Bounds of a VNC console's WebRTC signalling.
const (
	// rtcOfferEvery is the shortest time between two offers of one console.
	rtcOfferEvery = time.Second
	// rtcAnswerTimeout bounds one answer (the portal's candidates are its
	// own ports: at once).
	rtcAnswerTimeout = 10 * time.Second
)

// rtcMessage is one signalling message on a VNC console's websocket, as
// JSON in a text message (noVNC's RFB stream is binary). The page sends
// {"rtc":"offer","id":n,"sdp":…} or {"rtc":"stop"}; the portal answers
// {"rtc":"answer","id":n,"sdp":…}, or {"rtc":"refused","id":n,"error":…}
// and later, when the track ends by itself, {"rtc":"ended","id":n,
// "error":…}: the page then goes on with the websocket's video. The id
// is the offer's, so that a page that has moved on to another offer
// knows a late word about an earlier one. Candidates are never
// exchanged: the answer names the portal's own, and the browser's are
// not used.
type rtcMessage struct {
	RTC   string `json:"rtc"`
	ID    int64  `json:"id,omitempty"`
	SDP   string `json:"sdp,omitempty"`
	Error string `json:"error,omitempty"`
}

// rtcSignal answers one VNC console's offers: its screen's video then
// goes to the browser on a WebRTC track (package rtc) while the console's
// websocket keeps the rest (input, which stays view-only for a viewer
// without control; clipboard, cursor, the tiles between motion and the
// lossless repaint after it).
type rtcSignal struct {
	ctx context.Context
	srv *rtc.Server
	tap rfb.VideoTap
	// refused, if set, is why this console takes no offer.
	refused string
	ref     vdi.Ref
	log     *slog.Logger

	mu   sync.Mutex
	peer *rtc.Peer
	last time.Time
}

// newRTCSignal returns the signalling of ref's VNC console whose screen
// connection is conn (an rfb.VideoTap: this replica's hub, or the screen
// link to the owner's, whose video comes over a video link); recorded: the console is recorded, from its RFB stream, and
// video records the video that goes by WebRTC into it (nil: it cannot).
func (h *Handler) newRTCSignal(ctx context.Context, ref vdi.Ref, conn any, recorded bool, video *relay.VideoRecorder) *rtcSignal {
	s := &rtcSignal{ctx: ctx, srv: h.console.cfg.RTC, ref: ref, log: h.log}
	s.tap, _ = conn.(rfb.VideoTap)
	if s.tap != nil && video != nil {
		s.tap = recordedTap{s.tap, video}
	}
	switch {
	case s.srv == nil:
		s.refused = "WebRTC is off on this portal (CORRAL_VDI_WEBRTC_UDP is empty): the video stays on the console's connection."
	case recorded && video == nil:
		s.refused = "This desktop's consoles are recorded, and the recording is made from the console's connection: the video stays on it."
	case s.tap == nil:
		s.refused = "This console's screen has no video to send by WebRTC: the video stays on the console's connection."
	}
	return s
}

// text is the console's Options.Text: it reads one signalling message.
func (s *rtcSignal) text(msg []byte, send func([]byte) error) {
	reply := func(m rtcMessage) {
		b, _ := json.Marshal(m)
		send(b)
	}
	var m rtcMessage
	if err := json.Unmarshal(msg, &m); err != nil {
		reply(rtcMessage{RTC: "refused", Error: "The portal reads only JSON signalling messages here."})
		return
	}
	switch m.RTC {
	case "stop":
		s.stop()
		return
	case "offer":
	default:
		reply(rtcMessage{RTC: "refused", Error: "The portal knows the messages offer and stop, not " + quoteShort(m.RTC) + "."})
		return
	}
	if s.refused != "" {
		reply(rtcMessage{RTC: "refused", ID: m.ID, Error: s.refused})
		return
	}
	s.mu.Lock()
	if time.Since(s.last) < rtcOfferEvery {
		s.mu.Unlock()
		reply(rtcMessage{RTC: "refused", ID: m.ID, Error: "One offer a second: wait, then offer again."})
		return
	}
	s.last = time.Now()
	old := s.peer
	s.peer = nil
	s.mu.Unlock()
	if old != nil {
		old.Close()
	}
	ctx, cancel := context.WithTimeout(s.ctx, rtcAnswerTimeout)
	defer cancel()
	answer, p, err := s.srv.Answer(ctx, m.SDP, s.tap)
	if err != nil {
		var oe *rtc.OfferError
		why := "The portal could not answer the offer; the video stays on the console's connection."
		if errors.As(err, &oe) {
			why = "The portal refused the offer: " + oe.Why + "."
		} else {
			s.log.Warn("WebRTC offer not answered", "desktop", s.ref, "err", err)
		}
		reply(rtcMessage{RTC: "refused", ID: m.ID, Error: why})
		return
	}
	s.mu.Lock()
	if s.ctx.Err() != nil {
		s.mu.Unlock()
		p.Close()
		return
	}
	s.peer = p
	s.mu.Unlock()
	reply(rtcMessage{RTC: "answer", ID: m.ID, SDP: answer})
	go func() {
		select {
		case <-p.Done():
		case <-s.ctx.Done():
			p.Close()
			return
		}
		s.mu.Lock()
		mine := s.peer == p
		if mine {
			s.peer = nil
		}
		s.mu.Unlock()
		if mine { // not replaced or stopped: it ended by itself
			s.log.Info("WebRTC video ended; the console goes on with its websocket", "desktop", s.ref, "err", p.Err())
			reply(rtcMessage{RTC: "ended", ID: m.ID, Error: "The WebRTC video ended; the console goes on with its own connection."})
		}
	}()
}

// stop ends the console's track, if any.
func (s *rtcSignal) stop() {
	s.mu.Lock()
	p := s.peer
	s.peer = nil
	s.mu.Unlock()
	if p != nil {
		p.Close()
	}
}

// recordedTap is a recorded console's screen: the video its track takes
// goes into the recording too.
type recordedTap struct {
	rfb.VideoTap
	rec *relay.VideoRecorder
}

// VideoTo implements rfb.VideoTap.
func (t recordedTap) VideoTo(s rfb.VideoSink) (stop, keyFrame func(), err error) {
	return t.VideoTap.VideoTo(recordedSink{s, t.rec})
}

// recordedSink gives each access unit to the recording, then to the
// track; one that either cannot take is refused (the viewer then gets
// the next key frame, the recording with it).
type recordedSink struct {
	rfb.VideoSink
	rec *relay.VideoRecorder
}

// Video implements rfb.VideoSink.
func (s recordedSink) Video(au []byte, key bool, w, h int) bool {
	return s.rec.Video(au, key, w, h) && s.VideoSink.Video(au, key, w, h)
}

// VideoEnded implements rfb.VideoEnder: the track is told.
func (s recordedSink) VideoEnded(err error) {
	if e, ok := s.VideoSink.(rfb.VideoEnder); ok {
		e.VideoEnded(err)
	}
}

// quoteShort quotes s, cut to 40 bytes, for a reply.
func quoteShort(s string) string {
	if len(s) > 40 {
		s = s[:40]
	}
	b, _ := json.Marshal(s)
	return string(b)
}
