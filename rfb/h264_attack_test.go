package rfb

import (
	"bytes"
	"encoding/binary"
	"io"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// noise returns a w×h screen of random pixels: the most an encoder can be
// asked to code, so the stream's access units are as large as they get.
func noise(w, h int) []byte {
	pix := make([]byte, w*h*4)
	for i := 0; i+8 <= len(pix); i += 8 {
		binary.LittleEndian.PutUint64(pix[i:], rand.Uint64())
	}
	return pix
}

// setEncodings is a SetEncodings message for encs.
func setEncodings(encs ...int32) []byte {
	msg := []byte{msgSetEncodings, 0, 0, byte(len(encs))}
	for _, e := range encs {
		msg = binary.BigEndian.AppendUint32(msg, uint32(e))
	}
	return msg
}

// mostQueued returns the most H.264 bytes any client of hub has waiting.
func mostQueued(hub *Hub) int {
	hub.mu.Lock()
	defer hub.mu.Unlock()
	n := 0
	for c := range hub.clients {
		n = max(n, len(c.video))
	}
	return n
}

// TestAttack_H264ViewerNeverReads: a viewer in the H.264 stream that
// stops asking for updates (and reading) while the screen churns must not
// hold the stream's frames without bound: past the cap it leaves the
// stream, the others go on, and when it asks again it gets the screen,
// pixel-exact. Without the cap its queue grows with every frame.
func TestAttack_H264ViewerNeverReads(t *testing.T) {
	const w, h, limit = 320, 200, 128 << 10
	d := newScriptedDesktop(t, w, h)
	hub, serve := connectVideo(t, d, mustGStreamer(t))
	hub.mu.Lock()
	hub.vid.maxQueued = limit
	hub.mu.Unlock()
	lazy := dialVideo(t, serve())
	good := dialVideo(t, serve())

	// The lazy viewer reads nothing more while good reads 4 caps of video.
	got, most := 0, 0
	readUntil(t, good, "4 caps of H.264 for the reading viewer", func() bool {
		most = max(most, mostQueued(hub))
		got = 0
		for _, p := range good.h264 {
			got += len(p.data)
		}
		must(t, d.picture(noise(w, h)))
		return got >= 4*limit
	})
	most = max(most, mostQueued(hub))
	if most > limit {
		t.Errorf("a viewer that does not read had %d bytes of H.264 waiting; want at most %d", most, limit)
	}
	t.Logf("the reading viewer got %d bytes of H.264 in %d rectangles; at most %d waited for any viewer", got, len(good.h264), most)

	// Still, and the lazy viewer asks again: it gets the last screen.
	last := screen(w, h, 40)
	must(t, d.picture(last))
	lazy.conn.SetDeadline(time.Now().Add(60 * time.Second))
	for _, c := range []*testClient{good, lazy} {
		readUntil(t, c, "the still screen, pixel-exact", func() bool { return bytes.Equal(c.fb.pix, last) })
	}
}

// TestAttack_H264KeyFrameLoop: a viewer that leaves and rejoins the
// H.264 stream in a loop (SetEncodings without and with encoding 50, or
// its Picture choice Sharp and Fast, each rejoin asking for a key frame)
// gets the hub to make at most one key frame a second: every viewer's
// stream restarts no more often, and the others keep getting frames.
// Without the bound each of the loop's rejoins restarts the encoder.
func TestAttack_H264KeyFrameLoop(t *testing.T) {
	for _, loop := range []struct {
		name        string
		leave, join []int32
	}{
		{"WithoutAndWithH264", []int32{encTight, encZRLE, encExtendedDesktopSize}, videoEncodings},
		{"SharpAndFast", append(slices.Clone(videoEncodings), encCompressLevel0+1), append(slices.Clone(videoEncodings), encCompressLevel0+9)},
	} {
		t.Run(loop.name, func(t *testing.T) { keyFrameLoop(t, setEncodings(loop.leave...), setEncodings(loop.join...)) })
	}
}

// keyFrameLoop is TestAttack_H264KeyFrameLoop with an attacker that
// sends leave and join, the SetEncodings that take it out of the stream
// and back, in a loop.
func keyFrameLoop(t *testing.T, leave, join []byte) {
	const w, h = 320, 200
	d := newScriptedDesktop(t, w, h)
	_, serve := connectVideo(t, d, mustGStreamer(t))
	good := dialVideo(t, serve())
	x := 0
	move := func() {
		x = (x + 8) % (w - 16)
		must(t, d.picture(scrolled(w, h, x)))
	}
	readUntil(t, good, "H.264", func() bool { move(); return len(good.h264) > 0 })

	attacker := dialTestClient(t, serve(), videoEncodings...)
	go io.Copy(io.Discard, attacker.conn) // it asks for nothing, but reads what comes
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			attacker.conn.SetWriteDeadline(time.Now().Add(10 * time.Second))
			if _, err := attacker.conn.Write(append(slices.Clone(leave), join...)); err != nil {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()

	from, t0 := len(good.h264), time.Now()
	readUntil(t, good, "5 s of frames under the loop", func() bool { move(); return time.Since(t0) >= 5*time.Second })
	close(stop)
	<-done
	span := time.Since(t0)
	resets := 0
	for _, p := range good.h264[from:] {
		if p.flags&h264ResetContext != 0 {
			resets++
		}
	}
	frames := len(good.h264) - from
	t.Logf("%d H.264 rectangles in %v under the loop, %d of them a new stream", frames, span.Round(time.Millisecond), resets)
	if most := int(span/videoKeyEvery) + 2; resets > most {
		t.Errorf("the stream restarted %d times in %v; want at most %d (one a second)", resets, span.Round(time.Millisecond), most)
	}
	if frames <= resets {
		t.Errorf("%d rectangles, %d of them restarts: the viewer got no frames between key frames", frames, resets)
	}
}
