package relay_test

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/corral-dev/corral-vdi-portal/relay"
)

// TestVideoLink: the owner's frames reach the relaying end whole, with
// their key flag and screen size; a key frame asked for reaches the
// owner; a message that is no frame ends the relaying end's reading with
// ErrVideoFrame, and a request other than "key" ends the owner's.
func TestVideoLink(t *testing.T) {
	secret := []byte("a-peer-secret-of-thirty-two-byte")
	asked := make(chan struct{}, 4)
	ended := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, relay.PeerPath+"video/n0/ns/vm-1") {
			http.NotFound(w, r)
			return
		}
		ws, err := relay.Upgrader(nil).Upgrade(w, r, nil)
		if err != nil {
			return
		}
		vc := relay.NewVideoConn(ws)
		defer vc.Close()
		vc.Send([]byte{0, 0, 0, 1, 0x67, 1, 2}, true, 1280, 800)
		vc.Send([]byte{0, 0, 0, 1, 0x41, 3}, false, 1280, 800)
		ended <- vc.Requests(func() { asked <- struct{}{} })
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	vc, err := relay.DialPeerVideo(ctx, srv.URL, secret, "n0", "ns", "vm-1")
	if err != nil {
		t.Fatal(err)
	}
	defer vc.Close()
	for i, want := range []struct {
		au   []byte
		key  bool
		w, h int
	}{{[]byte{0, 0, 0, 1, 0x67, 1, 2}, true, 1280, 800}, {[]byte{0, 0, 0, 1, 0x41, 3}, false, 1280, 800}} {
		au, key, w, h, err := vc.Next()
		if err != nil || !bytes.Equal(au, want.au) || key != want.key || w != want.w || h != want.h {
			t.Errorf("frame %d: % x key %v %dx%d, %v; want % x key %v %dx%d", i, au, key, w, h, err, want.au, want.key, want.w, want.h)
		}
	}
	if err := vc.AskKeyFrame(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-asked:
	case <-time.After(5 * time.Second):
		t.Fatal("the owner heard no key frame request")
	}

	vc.Close()
	if err := <-ended; !websocket.IsCloseError(err, websocket.CloseNormalClosure) {
		t.Errorf("the owner's end after the relaying end closed: %v; want a normal close", err)
	}

	// A request that is not "key": the owner's end stops reading.
	raw, _, err := websocket.DefaultDialer.DialContext(ctx, "ws"+strings.TrimPrefix(srv.URL, "http")+relay.PeerPath+"video/n0/ns/vm-1", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	raw.WriteMessage(websocket.TextMessage, []byte("me"))
	select {
	case err := <-ended:
		if err == nil || !strings.Contains(err.Error(), `want "key"`) {
			t.Errorf("the owner's end after the request \"me\": %v; want it refused", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the owner's end read on after a request that is not \"key\"")
	}
}

// TestVideoLink_NotAFrame: a binary message too short for a frame's
// header, or with unknown flags, ends the relaying end's reading.
func TestVideoLink_NotAFrame(t *testing.T) {
	for _, msg := range [][]byte{{1, 0, 0}, {2, 0, 16, 0, 16, 0, 0, 0, 1}} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ws, err := relay.Upgrader(nil).Upgrade(w, r, nil)
			if err != nil {
				return
			}
			defer ws.Close()
			ws.WriteMessage(websocket.BinaryMessage, msg)
			ws.ReadMessage() // until the other end goes
		}))
		vc, err := relay.DialPeerVideo(context.Background(), srv.URL, []byte("s"), "n0", "ns", "vm-1")
		if err != nil {
			t.Fatal(err)
		}
		if _, _, _, _, err := vc.Next(); !errors.Is(err, relay.ErrVideoFrame) {
			t.Errorf("the message % x: %v; want ErrVideoFrame", msg, err)
		}
		vc.Close()
		srv.Close()
	}
}
