package snapshot_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"image"
	"image/color"
	"image/png"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/local"
	"github.com/corral-dev/corral-vdi-portal/snapshot"
)

// TestTake_RealXvnc snapshots a real desktop: the frame has the size asked
// for and shows the desktop's background colour (#2f3e4e) in a corner.
func TestTake_RealXvnc(t *testing.T) {
	d := startDesktop(t, "snap")
	var img *image.RGBA
	for range 20 { // the root colour is painted alongside the start
		conn, err := net.Dial("unix", d.VNCSocket())
		if err != nil {
			t.Fatal(err)
		}
		img, err = snapshot.Take(conn, 320, time.Now().Add(5*time.Second))
		conn.Close()
		if err != nil {
			t.Fatal(err)
		}
		if img.RGBAAt(2, 2) == (color.RGBA{0x2f, 0x3e, 0x4e, 255}) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	if got := img.Bounds().Size(); got != image.Pt(320, 200) {
		t.Errorf("thumbnail size %v; want 320x200", got)
	}
	if got := img.RGBAAt(2, 2); got != (color.RGBA{0x2f, 0x3e, 0x4e, 255}) {
		t.Errorf("corner pixel %v; want the desktop background #2f3e4e", got)
	}
	var buf bytes.Buffer
	if err := snapshot.PNG(&buf, img); err != nil {
		t.Fatal(err)
	}
	if _, err := png.Decode(&buf); err != nil {
		t.Errorf("PNG does not decode: %v", err)
	}
}

// startDesktop starts a real 640x400 desktop for t, its logs shown if t
// fails; it skips t where the machine has no desktop's programs.
func startDesktop(t *testing.T, name string) *local.Desktop {
	t.Helper()
	if err := local.CheckDesktopDeps(); err != nil {
		t.Skip(err)
	}
	dir, err := os.MkdirTemp("", "c"+name) // short: the VNC socket lives under it
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	t.Cleanup(func() {
		if t.Failed() {
			logs, _ := filepath.Glob(filepath.Join(dir, "run", "*.log"))
			for _, l := range logs {
				b, _ := os.ReadFile(l)
				t.Logf("%s:\n%s", l, b)
			}
		}
	})
	d, err := local.StartDesktop(context.Background(), local.DesktopSpec{Name: name, Dir: filepath.Join(dir, "run"), Home: filepath.Join(dir, "home"), Geometry: "640x400"}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Stop() })
	return d
}

func TestTake_RefusesNonRFB(t *testing.T) {
	client, server := net.Pipe()
	defer client.Close()
	go func() {
		server.Write([]byte("HTTP/1.1 400\r\n"))
		server.Close()
	}()
	if _, err := snapshot.Take(client, 100, time.Now().Add(time.Second)); err == nil {
		t.Fatal("Take on a non-RFB server succeeded; want an error")
	}
}

func TestScale(t *testing.T) {
	src := image.NewRGBA(image.Rect(0, 0, 4, 2))
	for i := range src.Pix {
		src.Pix[i] = 255
	}
	src.SetRGBA(0, 0, color.RGBA{0, 0, 0, 255})
	src.SetRGBA(1, 0, color.RGBA{0, 0, 0, 255})
	src.SetRGBA(0, 1, color.RGBA{0, 0, 0, 255})
	src.SetRGBA(1, 1, color.RGBA{0, 0, 0, 255})
	dst := snapshot.Scale(src, 2)
	if got := dst.Bounds().Size(); got != image.Pt(2, 1) {
		t.Fatalf("Scale(4x2, 2) size %v; want 2x1", got)
	}
	if got := dst.RGBAAt(0, 0); got.R != 0 {
		t.Errorf("left pixel %v; want black (average of the black half)", got)
	}
	if got := dst.RGBAAt(1, 0); got.R != 255 {
		t.Errorf("right pixel %v; want white", got)
	}
	if got := snapshot.Scale(src, 10); got != src {
		t.Errorf("Scale to a larger width copied; want src returned as is")
	}
	// A part of the picture (a screenshot's crop) scales from its own
	// pixels: the right half is all white.
	right := snapshot.Scale(src.SubImage(image.Rect(2, 0, 4, 2)).(*image.RGBA), 1)
	if got := right.Bounds(); got != image.Rect(0, 0, 1, 1) {
		t.Fatalf("Scale(right half, 1) bounds %v; want 1x1 at 0,0", got)
	}
	if got := right.RGBAAt(0, 0); got.R != 255 {
		t.Errorf("scaled right half %v; want white (it read the black left half)", got)
	}
}

// TestTake_RefusesHugeFrame: a hostile desktop announcing an 8192×8192
// screen gets no 256 MiB buffer.
func TestTake_RefusesHugeFrame(t *testing.T) {
	client, server := net.Pipe()
	defer client.Close()
	go func() {
		defer server.Close()
		server.Write([]byte("RFB 003.008\n"))
		io.ReadFull(server, make([]byte, 12))
		server.Write([]byte{1, 1}) // one security type: None
		io.ReadFull(server, make([]byte, 1))
		server.Write([]byte{0, 0, 0, 0}) // security OK
		io.ReadFull(server, make([]byte, 1))
		init := make([]byte, 24)
		binary.BigEndian.PutUint16(init[0:], 8192)
		binary.BigEndian.PutUint16(init[2:], 8192)
		server.Write(init)
	}()
	_, err := snapshot.Take(client, 100, time.Now().Add(2*time.Second))
	if err == nil || !strings.Contains(err.Error(), "implausible") {
		t.Fatalf("Take of an 8192x8192 screen = %v; want refused as implausible", err)
	}
}
