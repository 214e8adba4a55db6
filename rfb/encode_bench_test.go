package rfb

import (
	"context"
	"testing"
	"time"
)

// desktopScreen returns a real desktop's first screen at 1280×800 (the
// local desktop's window manager and terminal, as a user first sees it),
// read through a hub.
func desktopScreen(b *testing.B) []byte {
	b.Helper()
	dial, _, _ := startXvnc(b, "1280x800")
	var hubs Hubs
	conn, _, err := hubs.Join(context.Background(), "ns/bench", false, dial)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	c := dialTestClient(b, conn, encZRLE)
	time.Sleep(2 * time.Second) // the terminal has drawn its prompt
	c.request(false)
	must(b, c.next())
	return append([]byte(nil), c.fb.pix...)
}

// BenchmarkEncodeDesktop: one full update of a real desktop's first
// screen (1280×800), as each encoding a browser may take: the time to
// encode it and its bytes.
func BenchmarkEncodeDesktop(b *testing.B) {
	const w, h = 1280, 800
	pix := desktopScreen(b)
	for _, c := range []struct {
		name string
		enc  clientEncodings
	}{
		{"zrle", clientEncodings{zrle: true}},
		{"zrle+jpeg", clientEncodings{zrle: true, tight: true, jpeg: 7}},
		{"tight", clientEncodings{tight: true, tightFirst: true, zrle: true}},
		{"tight+jpeg (noVNC)", clientEncodings{tight: true, tightFirst: true, zrle: true, jpeg: 7}},
	} {
		b.Run(c.name, func(b *testing.B) {
			cl := &client{}
			u := &update{w: w, h: h, rects: []Rect{{0, 0, w, h}}, pix: [][]byte{pix}, pf: canonical, enc: c.enc}
			n := 0
			for b.Loop() {
				n = len(u.encode(cl))
			}
			b.ReportMetric(float64(n)/1024, "KiB/frame")
		})
	}
}
