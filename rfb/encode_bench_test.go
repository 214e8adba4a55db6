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
	benchEncode(b, 1280, 800, desktopScreen(b), []encodeCase{
		{"zrle", clientEncodings{zrle: true}},
		{"zrle+jpeg", clientEncodings{zrle: true, tight: true, jpeg: 7}},
		{"tight", clientEncodings{tight: true, tightFirst: true, zrle: true}},
		{"tight+jpeg", clientEncodings{tight: true, tightFirst: true, zrle: true, jpeg: 7}},
	})
}
