package kube_test

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/relay"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// h264Reaches opens user's VNC console of ref on r asking for Open H.264
// with the Picture choice Fast (compression level 9: every change as
// video), has type make changes, and waits up to a minute for an H.264
// rectangle whose access unit is a key frame (SPS and IDR): the desktop's
// screen encoded by the encoder sidecar's service.
func h264Reaches(t *testing.T, r *replica, ref vdi.Ref, user string, typeSome func()) {
	t.Helper()
	ws, err := r.dial("/ws/vnc/"+ref.Namespace+"/"+ref.Name, user)
	if err != nil {
		t.Fatalf("%s's VNC console of %s on replica %s: %v", user, ref, r.name, err)
	}
	conn := relay.NewWSConn(ws, relay.WSConnOptions{})
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(time.Minute))
	br := bufio.NewReader(conn)
	bpp, err := rfbHandshake(br, conn)
	if err != nil {
		t.Fatalf("%s's VNC console on replica %s: the handshake: %v", user, r.name, err)
	}
	enc := []int32{50, 0, -247} // Open H.264, Raw, compression 9 (Fast)
	msg := []byte{2, 0, 0, byte(len(enc))}
	for _, e := range enc {
		msg = binary.BigEndian.AppendUint32(msg, uint32(e))
	}
	request := []byte{3, 1, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff} // incremental, the whole screen
	if _, err := conn.Write(append(msg, request...)); err != nil {
		t.Fatal(err)
	}
	typed := make(chan struct{})
	go func() {
		defer close(typed)
		for range 20 {
			typeSome()
			time.Sleep(200 * time.Millisecond)
		}
	}()
	defer func() { <-typed }()
	rects := 0
	for {
		au, err := nextH264(br, bpp)
		if err != nil {
			t.Fatalf("%s's console on replica %s, after %d H.264 rectangles: %v; want a key frame of the desktop's screen", user, r.name, rects, err)
		}
		if au == nil {
			if _, err := conn.Write(request); err != nil {
				t.Fatal(err)
			}
			continue
		}
		rects++
		types := nalTypes(au)
		if bytes.Contains(types, []byte{7}) && bytes.Contains(types, []byte{5}) {
			t.Logf("%s's console on replica %s got the screen as H.264: a key frame of %d bytes (NAL types %v) after %d rectangles", user, r.name, len(au), types, rects)
			return
		}
	}
}

// rfbHandshake shakes hands as an RFB 3.8 client with security None, shared,
// and returns the server's bytes per pixel.
func rfbHandshake(br *bufio.Reader, w io.Writer) (int, error) {
	b := make([]byte, 12)
	if _, err := io.ReadFull(br, b); err != nil {
		return 0, err
	}
	if _, err := w.Write([]byte("RFB 003.008\n")); err != nil {
		return 0, err
	}
	n, err := br.ReadByte()
	if err != nil || n == 0 {
		return 0, fmt.Errorf("no security types (%v)", err)
	}
	if _, err := io.ReadFull(br, make([]byte, n)); err != nil {
		return 0, err
	}
	if _, err := w.Write([]byte{1, 1}); err != nil { // None, then ClientInit: shared
		return 0, err
	}
	res := make([]byte, 4+24)
	if _, err := io.ReadFull(br, res); err != nil {
		return 0, err
	}
	if binary.BigEndian.Uint32(res) != 0 {
		return 0, fmt.Errorf("security result %x", res[:4])
	}
	name := make([]byte, binary.BigEndian.Uint32(res[24:]))
	_, err = io.ReadFull(br, name)
	return int(res[8]) / 8, err
}

// nextH264 reads one server message and returns the last Open H.264
// access unit of it (nil if it has none).
func nextH264(br *bufio.Reader, bpp int) ([]byte, error) {
	t, err := br.ReadByte()
	if err != nil {
		return nil, err
	}
	switch t {
	case 0: // FramebufferUpdate
		h := make([]byte, 3)
		if _, err := io.ReadFull(br, h); err != nil {
			return nil, err
		}
		var au []byte
		for range binary.BigEndian.Uint16(h[1:]) {
			r := make([]byte, 12)
			if _, err := io.ReadFull(br, r); err != nil {
				return nil, err
			}
			w, hh := int(binary.BigEndian.Uint16(r[4:])), int(binary.BigEndian.Uint16(r[6:]))
			switch e := int32(binary.BigEndian.Uint32(r[8:])); e {
			case 0:
				_, err = br.Discard(w * hh * bpp)
			case 50:
				lf := make([]byte, 8)
				if _, err = io.ReadFull(br, lf); err == nil {
					au = make([]byte, binary.BigEndian.Uint32(lf))
					_, err = io.ReadFull(br, au)
				}
			default:
				return nil, fmt.Errorf("a rectangle of encoding %d, not asked for", e)
			}
			if err != nil {
				return nil, err
			}
		}
		return au, nil
	case 2: // Bell
		return nil, nil
	case 3: // ServerCutText
		h := make([]byte, 7)
		if _, err := io.ReadFull(br, h); err != nil {
			return nil, err
		}
		_, err := br.Discard(int(binary.BigEndian.Uint32(h[3:])))
		return nil, err
	}
	return nil, fmt.Errorf("server message type %d", t)
}

// nalTypes lists the NAL unit types of an Annex-B access unit.
func nalTypes(au []byte) []byte {
	var types []byte
	for i := 0; i+3 < len(au); i++ {
		if au[i] == 0 && au[i+1] == 0 && au[i+2] == 1 {
			types = append(types, au[i+3]&0x1f)
			i += 3
		}
	}
	return types
}
