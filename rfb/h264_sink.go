package rfb

import (
	"errors"
	"net"
)

// VideoSink takes a viewer's H.264 stream in place of its RFB
// connection: a WebRTC track (package rtc). The viewer's Picture choice
// decides as before when changes go as video; the tiles between, and the
// lossless repaint once the screen is still, still come over RFB.
type VideoSink interface {
	// Video takes one Annex-B access unit of a w×h screen (key: an IDR
	// with its SPS and PPS, where a decoder may start). It must not
	// block (the hub's lock is held) nor change au, which other viewers
	// share; it reports false when it cannot take au (its queue is
	// full), and the viewer then joins again at the next key frame.
	Video(au []byte, key bool, w, h int) bool
}

// VideoEnder is a VideoSink told when its tap's video ends by itself,
// before stop: a WebRTC track then ends, and its page goes on with the
// console's own connection. A hub's viewer's video ends only with the
// viewer; a screen relayed from another replica's hub ends when its video
// link breaks and cannot be dialed again.
type VideoEnder interface {
	VideoEnded(err error)
}

// VideoTap is offered by the connections Hubs.Join returns: a viewer of
// this replica's hub whose video may go to a sink. A screen relayed from
// another replica has none.
type VideoTap interface {
	// VideoTo sends the viewer's access units to s, from its next key
	// frame, until stop. keyFrame asks for a key frame (a decoder that
	// lost packets), at most one a second as for every viewer.
	VideoTo(s VideoSink) (stop, keyFrame func(), err error)
}

// ErrNoViewer is VideoTo's error before the viewer's handshake is done,
// or after it left.
var ErrNoViewer = errors.New("rfb: the viewer is not on the screen")

var _ VideoTap = (*clientConn)(nil)

// VideoTo implements VideoTap.
func (c *clientConn) VideoTo(s VideoSink) (stop, keyFrame func(), err error) {
	h := c.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	v := h.clientOn(c.server)
	if v == nil {
		return nil, nil, ErrNoViewer
	}
	v.leaveStream(h.fb.w, h.fb.h)
	v.sink = s
	h.kickVideo()
	stop = func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if v.sink == s {
			v.sink = nil
			v.leaveStream(h.fb.w, h.fb.h)
		}
	}
	keyFrame = func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if v.sink == s && v.inStream {
			v.inStream = false // the next frame finds it waiting: needKey
			h.vid.needKey = true
		}
	}
	return stop, keyFrame, nil
}

// clientOn returns the viewer served on conn, or nil; hub.mu is held.
func (h *Hub) clientOn(conn net.Conn) *client {
	for c := range h.clients {
		if c.conn == conn {
			return c
		}
	}
	return nil
}

// toSink gives au, a w×hh screen, to c's sink (its decoder starts again
// at any key frame). A viewer out of the stream waits for a key frame; a sink
// that cannot take the frame takes the viewer out (it joins again at the
// next key frame); hub.mu is held.
func (h *Hub) toSink(c *client, au accessUnit, w, hh int) {
	if !c.inStream && !au.key {
		h.vid.needKey = true
		return
	}
	c.inStream, c.lossy = true, true
	if !c.sink.Video(au.data, au.key, w, hh) {
		c.inStream = false
		h.vid.needKey = true
	}
}
