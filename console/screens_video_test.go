package console_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/console"
	"github.com/corral-dev/corral-vdi-portal/relay"
	"github.com/corral-dev/corral-vdi-portal/rfb"
	"github.com/corral-dev/corral-vdi-portal/snapshot"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// videoFrame is one access unit a sink took.
type videoFrame struct {
	au   []byte
	key  bool
	w, h int
}

// frameSink is an rfb.VideoSink (a WebRTC track) that passes what it
// takes on, and is told when its video ends by itself (rfb.VideoEnder).
type frameSink struct {
	frames chan videoFrame
	ended  chan error
}

func (s frameSink) Video(au []byte, key bool, w, h int) bool {
	select {
	case s.frames <- videoFrame{bytes.Clone(au), key, w, h}:
		return true
	default:
		return false
	}
}

func (s frameSink) VideoEnded(err error) { s.ended <- err }

// TestScreens_VideoAcrossReplicas: a viewer on b relayed to a's hub (a
// owns the screen) sends its video to a sink of b's (its WebRTC track on
// b): b takes it from a over a video link named by the screen link's
// nonce, from a key frame of the desktop's screen, and a key frame asked
// for comes; the desktop still has one upstream and a's hub its one
// encoder. A video link is refused, before its upgrade, when it names a
// screen link of another desktop than its signature (409), when its
// nonce names no screen link, and when it is signed with another secret
// (401). Without the video link b's viewer had no video to tap.
//
// A video link the network between the replicas cuts while the screen
// link lives is dialed again, and the key frames come again; when a
// cannot be reached any more, the sink (b's WebRTC track) is told its
// video ended, and the page goes on with the console's connection, whose
// screen link still carries the picture. Before, b's track stayed open
// and took nothing, and was never told.
func TestScreens_VideoAcrossReplicas(t *testing.T) {
	if err := exec.Command("gst-inspect-1.0", "--exists", "x264enc").Run(); err != nil {
		t.Skip("no GStreamer x264enc (gstreamer1.0-plugins-ugly): scripts/deps.sh installs it")
	}
	dial, dials := startDesktop(t)
	table := &ownerTable{recs: map[string]console.Owner{}, dead: map[string]bool{}}
	a := startReplicaHubs(t, table, "a", dial, &rfb.Hubs{H264: "gst-launch-1.0"})
	b := startReplicaHubs(t, table, "b", dial, &rfb.Hubs{H264: "gst-launch-1.0"})
	ref := vdi.Ref{Namespace: "ns", Name: "vm-video"}
	ctx := context.Background()

	onA, _, err := a.screens.Join(ctx, ref, true, dial)
	if err != nil {
		t.Fatal(err)
	}
	holder, err := snapshot.Watch(onA)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	onB, path, err := b.screens.Join(ctx, ref, false, dial)
	if err != nil || path != console.PathPeer {
		t.Fatalf("a viewer on b: %v by %q; want a's hub by %q", err, path, console.PathPeer)
	}
	defer onB.Close()
	tap, ok := onB.(rfb.VideoTap)
	if !ok {
		t.Fatalf("the viewer's screen on b (%T) has no video to tap; want a's hub's, over a video link", onB)
	}
	if err := videoViewer(onB); err != nil {
		t.Fatalf("the viewer on b: %v", err)
	}
	sink := frameSink{frames: make(chan videoFrame, 100), ended: make(chan error, 1)}
	stop, keyFrame, err := tap.VideoTo(sink)
	if err != nil {
		t.Fatalf("the video of b's viewer: %v", err)
	}
	defer stop()
	n := 0
	// key types on the desktop until the sink has a key frame.
	key := func(what string) videoFrame {
		t.Helper()
		for end := time.Now().Add(time.Minute); time.Now().Before(end); {
			holder.Type("abcdefghij"[n%10 : n%10+1])
			n++
			select {
			case f := <-sink.frames:
				if f.key {
					return f
				}
			case <-time.After(200 * time.Millisecond):
			}
		}
		t.Fatalf("%s: no key frame in the sink of b's viewer after %d keys; want the desktop's screen as video", what, n)
		return videoFrame{}
	}
	f := key("the first frame")
	if !bytes.HasPrefix(f.au, []byte{0, 0, 0, 1}) && !bytes.HasPrefix(f.au, []byte{0, 0, 1}) || f.w != 320 || f.h != 200 {
		t.Errorf("the first key frame: %d bytes of a %dx%d screen starting % x; want an Annex-B access unit of the 320x200 screen", len(f.au), f.w, f.h, f.au[:min(8, len(f.au))])
	}
	keyFrame()
	key("a key frame asked for")
	if d := dials.Load(); d != 1 {
		t.Errorf("%d upstream connections; want 1", d)
	}

	// The links b's video link names, signed for another desktop or
	// with another secret, or no link at all.
	nonce := console.LinkNonce(onB)
	other := vdi.Ref{Namespace: "ns", Name: "vm-other"}
	opened := false
	open := func() (*relay.VideoConn, error) { opened = true; return nil, errors.New("not opened") }
	if err := a.screens.ServeVideo(ctx, other, nonce, open); !errors.Is(err, console.ErrNoScreenLink) || opened {
		t.Errorf("the video of b's screen link named for %s: %v (opened: %v); want ErrNoScreenLink, not opened", other, err, opened)
	}
	for _, c := range []struct {
		what, secret, nonce string
		ref                 vdi.Ref
		status              int
	}{
		{"signed for another desktop than the screen link's", testSecret, nonce, other, http.StatusConflict},
		{"naming no screen link", testSecret, "00112233445566778899aabbccddeeff", ref, http.StatusConflict},
		{"signed with another secret", "not-the-peer-secret-of-the-portal", nonce, ref, http.StatusUnauthorized},
	} {
		vc, err := relay.DialPeerVideo(ctx, a.srv.URL, []byte(c.secret), c.nonce, c.ref.Namespace, c.ref.Name)
		if err == nil {
			vc.Close()
		}
		if !isStatus(err, c.status) {
			t.Errorf("a video link %s: %v; want %d", c.what, err, c.status)
		}
	}

	a.breakVideoLinks()
	key("after the network cut the video link")
	select {
	case err := <-sink.ended:
		t.Fatalf("the video of b's viewer ended when its link was cut once: %v; want the link dialed again", err)
	default:
	}
	// A refusal that may pass (503) is dialed again too; one that cannot
	// (401, 409) ends the video at once.
	a.busy.Store(1)
	a.breakVideoLinks()
	key("after the video link was cut and its first redial answered 503")
	select {
	case err := <-sink.ended:
		t.Fatalf("the video of b's viewer ended when a answered its redial 503 once: %v; want it dialed again", err)
	default:
	}
	// b logged each break and each redial, naming the desktop and the
	// owner, and never the link's nonce (it opens the viewer's video).
	broke, again := b.log.with("video link to the screen's replica broke"), b.log.with("is dialed again")
	if len(broke) < 3 || len(again) < 2 {
		t.Errorf("b logged %d breaks of the video link and %d redials; want at least 3 and 2 (two cuts, one redial answered 503):\n%s", len(broke), len(again), strings.Join(b.log.with("video link"), ""))
	}
	for _, l := range append(broke, again...) {
		if !strings.Contains(l, "desktop=ns/vm-video") || !strings.Contains(l, "owner=a") || strings.Contains(l, nonce) {
			t.Errorf("b's log line %q: want the desktop and the owner named, and not the link's nonce", l)
		}
	}
	a.srv.Close() // a can no longer be reached; the screen link lives on
	a.breakVideoLinks()
	select {
	case err := <-sink.ended:
		t.Logf("the video of b's viewer ended: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("a cannot be reached and the video link is cut: b's sink was never told its video ended; want it told, so that the page goes on with the console's connection")
	}
	if d := dials.Load(); d != 1 {
		t.Errorf("%d upstream connections after the video link broke; want 1", d)
	}
}

// videoViewer shakes RFB hands on conn as a viewer asking for Open H.264
// with the Picture choice Fast (every change as video), asks for the
// screen, and reads what comes until conn closes.
func videoViewer(conn net.Conn) error {
	br := bufio.NewReader(conn)
	b := make([]byte, 12)
	if _, err := io.ReadFull(br, b); err != nil {
		return err
	}
	if _, err := conn.Write([]byte("RFB 003.008\n")); err != nil {
		return err
	}
	n, err := br.ReadByte()
	if err != nil || n == 0 {
		return fmt.Errorf("no security types (%v)", err)
	}
	if _, err := io.ReadFull(br, make([]byte, n)); err != nil {
		return err
	}
	if _, err := conn.Write([]byte{1, 1}); err != nil { // None, then ClientInit: shared
		return err
	}
	res := make([]byte, 4+24)
	if _, err := io.ReadFull(br, res); err != nil {
		return err
	}
	if _, err := io.ReadFull(br, make([]byte, binary.BigEndian.Uint32(res[24:]))); err != nil {
		return err
	}
	msg := []byte{2, 0, 0, 3}
	for _, e := range []int32{50, 0, -247} { // Open H.264, Raw, compression 9 (Fast)
		msg = binary.BigEndian.AppendUint32(msg, uint32(e))
	}
	msg = append(msg, 3, 1, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff) // incremental, the whole screen
	if _, err := conn.Write(msg); err != nil {
		return err
	}
	go io.Copy(io.Discard, br)
	return nil
}
