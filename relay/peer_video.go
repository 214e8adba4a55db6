package relay

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/gorilla/websocket"
)

// Video links: a replica that relays a viewer to another replica's hub
// over a screen link (DialPeerScreen) and sends the viewer's video on
// its own WebRTC track takes the viewer's H.264 access units from the
// owner over a video link: a peer link to PeerPath +
// "video/{nonce}/{ns}/{member}" whose signature covers VideoLink(nonce),
// the desktop and the owner, once. nonce is the screen link's: the owner
// sends the video of that link's viewer only, and only if the link is of
// the desktop the video link names. Each access unit is one binary
// message, a videoHeader then the Annex-B bytes; the relaying replica
// sends the text message "key" to ask for a key frame. The owner's hub
// encodes once for every viewer, so the video costs no second encoder,
// and the desktop sees no second client.

// VideoLink is the console name a video link joining the screen link
// whose signature's nonce is nonce is signed for.
func VideoLink(nonce string) string { return "video/" + nonce }

// Bounds of a video link.
const (
	// MaxVideoFrame bounds one access unit on a video link (a key frame
	// of the largest screen a hub takes is well within it).
	MaxVideoFrame = 16 << 20
	// videoHeader is a frame's header: flags (bit 0: a key frame), then
	// the screen's width and height, big-endian uint16s.
	videoHeader = 5
	// videoKeyAsk is the text message asking the owner for a key frame.
	videoKeyAsk = "key"
	// videoWriteTimeout bounds one frame's write: a link that takes
	// nothing for that long ends.
	videoWriteTimeout = 10 * time.Second
)

// ErrVideoFrame is returned by VideoConn.Next for a message that is no
// frame.
var ErrVideoFrame = errors.New("relay: not a video link frame")

// VideoConn is one end of a video link. The owner's end Sends frames and
// reads key frame requests (Requests); the relaying end reads frames
// (Next) and asks for key frames (AskKeyFrame). One goroutine may read
// while others write.
type VideoConn struct {
	ws  *websocket.Conn
	wmu sync.Mutex
}

// NewVideoConn returns the owner's end of a video link on ws, an
// upgraded peer link.
func NewVideoConn(ws *websocket.Conn) *VideoConn {
	ws.SetReadLimit(int64(len(videoKeyAsk))) // the relaying end sends only requests
	return &VideoConn{ws: ws}
}

// DialPeerVideo opens a video link to the peer portal at base for the
// viewer of the screen link of ns/member whose nonce is nonce. A peer
// that serves no such link refuses with a *PeerRefusal of status 409.
func DialPeerVideo(ctx context.Context, base string, secret []byte, nonce, ns, member string) (*VideoConn, error) {
	ws, _, err := dialPeerWS(ctx, base, secret, "video/"+nonce, VideoLink(nonce), ns, member)
	if err != nil {
		return nil, err
	}
	ws.SetReadLimit(videoHeader + MaxVideoFrame)
	return &VideoConn{ws: ws}, nil
}

// Send writes one access unit of a w×h screen (key: where a decoder may
// start).
func (c *VideoConn) Send(au []byte, key bool, w, h int) error {
	var hdr [videoHeader]byte
	if key {
		hdr[0] = 1
	}
	binary.BigEndian.PutUint16(hdr[1:], uint16(w))
	binary.BigEndian.PutUint16(hdr[3:], uint16(h))
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.ws.SetWriteDeadline(time.Now().Add(videoWriteTimeout))
	wr, err := c.ws.NextWriter(websocket.BinaryMessage)
	if err != nil {
		return err
	}
	wr.Write(hdr[:])
	wr.Write(au)
	return wr.Close()
}

// Next reads the next access unit (see Send). The link's normal end is
// an error too: the video ends with it.
func (c *VideoConn) Next() (au []byte, key bool, w, h int, err error) {
	for {
		typ, b, err := c.ws.ReadMessage()
		if err != nil {
			return nil, false, 0, 0, err
		}
		if typ != websocket.BinaryMessage {
			continue
		}
		if len(b) <= videoHeader || b[0]&^1 != 0 {
			return nil, false, 0, 0, fmt.Errorf("%w (%d bytes)", ErrVideoFrame, len(b))
		}
		return b[videoHeader:], b[0] == 1, int(binary.BigEndian.Uint16(b[1:])), int(binary.BigEndian.Uint16(b[3:])), nil
	}
}

// AskKeyFrame asks the owner for a key frame.
func (c *VideoConn) AskKeyFrame() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.ws.SetWriteDeadline(time.Now().Add(videoWriteTimeout))
	return c.ws.WriteMessage(websocket.TextMessage, []byte(videoKeyAsk))
}

// Requests reads the relaying end's messages until the link ends,
// calling keyFrame for each request of a key frame; anything else ends
// the link. It returns why the link ended.
func (c *VideoConn) Requests(keyFrame func()) error {
	for {
		typ, b, err := c.ws.ReadMessage()
		if err != nil {
			return err
		}
		if typ != websocket.TextMessage || string(b) != videoKeyAsk {
			return fmt.Errorf("relay: a video link's request %q: want %q", b, videoKeyAsk)
		}
		keyFrame()
	}
}

// Close sends a normal close frame and closes the link.
func (c *VideoConn) Close() error {
	c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
	return c.ws.Close()
}
