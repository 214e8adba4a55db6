package console

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/corral-dev/corral-vdi-portal/relay"
	"github.com/corral-dev/corral-vdi-portal/rfb"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// A viewer relayed to another replica's hub takes its video by WebRTC
// from the replica it is connected to: that replica's WebRTC peer is the
// browser's, and the owner's hub encodes once for every viewer. The
// relaying replica asks the owner for the video of its screen link's
// viewer over a video link (relay.DialPeerVideo), named by the screen
// link's nonce; the owner sends that viewer's access units, as its own
// WebRTC peer would take them (rfb.VideoTap).

// ErrNoScreenLink is why an owner refuses a video link: it serves no
// screen link of that nonce and desktop (it ended, or never was).
var ErrNoScreenLink = errors.New("console: no screen link of the desktop by that nonce on this replica")

// linkFrames bounds the access units waiting for a video link: past it
// the viewer waits for a key frame (the hub makes one at most a second).
const linkFrames = 30

// servedLink is a screen link this replica serves: its viewer on the
// hub, until done.
type servedLink struct {
	ref  vdi.Ref
	tap  rfb.VideoTap
	done <-chan struct{}
}

// serveLinkVideo notes the screen link named nonce, whose viewer on ref's
// hub is conn, until ctx ends, for a video link to name.
func (s *Screens) serveLinkVideo(ctx context.Context, ref vdi.Ref, nonce string, conn any) {
	tap, ok := conn.(rfb.VideoTap)
	if !ok || nonce == "" {
		return
	}
	s.mu.Lock()
	if s.links == nil {
		s.links = map[string]servedLink{}
	}
	s.links[nonce] = servedLink{ref: ref, tap: tap, done: ctx.Done()}
	s.mu.Unlock()
	context.AfterFunc(ctx, func() {
		s.mu.Lock()
		delete(s.links, nonce)
		s.mu.Unlock()
	})
}

// ServeVideo sends the video of the viewer of the screen link named
// nonce, which must be a link of ref's screen, over the video link open
// returns (the caller's upgrade), until the link, the screen link or ctx
// ends. It returns ErrNoScreenLink, before calling open, when this
// replica serves no such screen link: a video link signed for one
// desktop never carries another's screen.
func (s *Screens) ServeVideo(ctx context.Context, ref vdi.Ref, nonce string, open func() (*relay.VideoConn, error)) error {
	s.mu.Lock()
	link, ok := s.links[nonce]
	s.mu.Unlock()
	if !ok || link.ref != ref {
		return ErrNoScreenLink
	}
	sink := &linkSink{frames: make(chan linkFrame, linkFrames)}
	stop, keyFrame, err := link.tap.VideoTo(sink)
	if err != nil {
		return err
	}
	defer stop()
	vc, err := open()
	if err != nil {
		return err
	}
	defer vc.Close()
	asked := make(chan error, 1)
	go func() { asked <- vc.Requests(keyFrame) }()
	for {
		select {
		case f := <-sink.frames:
			if err := vc.Send(f.au, f.key, f.w, f.h); err != nil {
				return err
			}
		case err := <-asked:
			return err
		case <-link.done:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// linkFrame is one access unit waiting for a video link.
type linkFrame struct {
	au   []byte
	key  bool
	w, h int
}

// linkSink queues a viewer's access units for its video link.
type linkSink struct {
	frames chan linkFrame
}

// Video implements rfb.VideoSink.
func (k *linkSink) Video(au []byte, key bool, w, h int) bool {
	select {
	case k.frames <- linkFrame{au, key, w, h}:
		return true
	default:
		return false
	}
}

// linkedScreen is a viewer's screen link to the owner's hub, as Join
// returns it: its video may go to a sink of this replica's (a WebRTC
// peer), taken from the owner over a video link.
type linkedScreen struct {
	*relay.ScreenConn
	ctx    context.Context // the viewer's console
	base   string          // the owner's URL
	secret []byte
	ref    vdi.Ref
	owner  string       // the owner's replica, for the log
	log    *slog.Logger // where a broken video link and its redials are told
}

var _ rfb.VideoTap = (*linkedScreen)(nil)

// Bounds of a video link that broke while its screen link lives (a
// proxy or the network between the replicas cut it, or the owner's write
// timed out): the relaying replica dials it again, at most videoRedials
// times in a row, after videoRedialWait doubled at each try; a link that
// carried a frame starts the count again. The owner's viewer meanwhile
// takes its video over the screen link.
const videoRedials = 3

// videoRedialWait is the wait before the first dial again.
const videoRedialWait = 250 * time.Millisecond

// VideoTo implements rfb.VideoTap: the owner's hub sends the viewer's
// access units from its next key frame over a video link, until stop. A
// video link that breaks while the viewer's console lives is dialed
// again (also after a refusal that may pass: 5xx, a replica draining);
// when it cannot be (the owner refuses for good or cannot be reached, or
// no longer serves the screen link), the sink is told (rfb.VideoEnder):
// a WebRTC track then ends, and its page goes on with the console's own
// connection, whose screen link carries the video.
func (l *linkedScreen) VideoTo(sink rfb.VideoSink) (stop, keyFrame func(), err error) {
	vc, err := l.dialVideo(l.ctx)
	if err != nil {
		return nil, nil, err
	}
	v := &linkVideo{vc: vc}
	ctx, cancel := context.WithCancel(l.ctx)
	go l.relayVideo(ctx, v, sink)
	stop = func() {
		cancel()
		v.close()
	}
	return stop, v.askKeyFrame, nil
}

// dialVideo opens a video link to the owner for the viewer.
func (l *linkedScreen) dialVideo(ctx context.Context) (*relay.VideoConn, error) {
	return relay.DialPeerVideo(ctx, l.base, l.secret, l.Nonce, l.ref.Namespace, l.ref.Name)
}

// relayVideo gives the access units of v's link to sink until ctx ends,
// dialing the link again when it breaks (see videoRedials), and tells
// sink when it cannot.
func (l *linkedScreen) relayVideo(ctx context.Context, v *linkVideo, sink rfb.VideoSink) {
	defer v.close()
	defer context.AfterFunc(ctx, v.close)()
	vc, tries := v.current(), 0
	for {
		carried, err := relayFrames(vc, sink)
		if carried {
			tries = 0
		}
		for {
			var refused *relay.PeerRefusal
			switch {
			case ctx.Err() != nil:
				return
			case tries == videoRedials || errors.As(err, &refused) && refused.Status < 500:
				if e, ok := sink.(rfb.VideoEnder); ok {
					e.VideoEnded(fmt.Errorf("console: the video link to the screen's replica broke and could not be dialed again: %w", err))
				}
				return
			}
			wait := videoRedialWait << tries
			l.log.Info("the video link to the screen's replica broke; dialing it again", "desktop", l.ref.String(), "owner", l.owner, "try", tries+1, "of", videoRedials, "in", wait, "err", err)
			select {
			case <-time.After(wait):
			case <-ctx.Done():
				return
			}
			tries++
			if vc, err = l.dialVideo(ctx); err == nil {
				l.log.Info("the video link to the screen's replica is dialed again", "desktop", l.ref.String(), "owner", l.owner, "try", tries)
				break
			}
		}
		if !v.set(vc) {
			return
		}
	}
}

// relayFrames gives vc's access units to sink, from a key frame, until
// vc ends; carried: it gave one.
func relayFrames(vc *relay.VideoConn, sink rfb.VideoSink) (carried bool, err error) {
	in := false // the sink's decoder has the stream since a key frame
	for {
		au, key, w, h, err := vc.Next()
		if err != nil {
			return carried, err
		}
		if !in && !key {
			continue // a key frame is on its way: asked for below
		}
		if in = sink.Video(au, key, w, h); !in {
			vc.AskKeyFrame()
		}
		carried = carried || in
	}
}

// linkVideo is the video link a viewer's video comes over now.
type linkVideo struct {
	mu     sync.Mutex
	vc     *relay.VideoConn
	closed bool
}

// current returns the link.
func (v *linkVideo) current() *relay.VideoConn {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.vc
}

// set makes vc, dialed again, the link in place of the broken one;
// false: the video was stopped meanwhile, and vc is closed.
func (v *linkVideo) set(vc *relay.VideoConn) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		vc.Close()
		return false
	}
	v.vc.Close()
	v.vc = vc
	return true
}

// askKeyFrame asks the owner for a key frame over the link.
func (v *linkVideo) askKeyFrame() { v.current().AskKeyFrame() }

// close closes the link for good.
func (v *linkVideo) close() {
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.closed {
		v.closed = true
		v.vc.Close()
	}
}
