package e2e

import (
	"bytes"
	byteorder "encoding/binary"
	"testing"

	"github.com/mxschmitt/playwright-go"
)

// splitFirstFrame rewrites a corral-rfb-v1 recording (header, then
// records: direction, ms, length, bytes) so that its first server record
// of 1 KiB or more, the desktop's first screen, comes in pieces of 1 KiB,
// each gap ms after the one before, and every record after them later by
// as much: as a busy machine records one update read in pieces. It
// returns nil when b is no such recording.
func splitFirstFrame(b []byte, gap uint32) []byte {
	magic := []byte("CORRAL-RFB 1\n")
	if !bytes.HasPrefix(b, magic) || len(b) < len(magic)+4 {
		return nil
	}
	off := len(magic) + 4 + int(byteorder.BigEndian.Uint32(b[len(magic):]))
	if off > len(b) {
		return nil
	}
	out := append([]byte(nil), b[:off]...)
	record := func(dir byte, at uint32, data []byte) {
		out = append(out, dir)
		out = byteorder.BigEndian.AppendUint32(out, at)
		out = byteorder.BigEndian.AppendUint32(out, uint32(len(data)))
		out = append(out, data...)
	}
	var shift uint32
	for off+9 <= len(b) {
		dir, at, n := b[off], byteorder.BigEndian.Uint32(b[off+1:]), int(byteorder.BigEndian.Uint32(b[off+5:]))
		if off+9+n > len(b) {
			break
		}
		data := b[off+9 : off+9+n]
		off += 9 + n
		if shift == 0 && dir == 'S' && n >= 1024 {
			for ; len(data) > 1024; data = data[1024:] {
				record(dir, at+shift, data[:1024])
				shift += gap
			}
		}
		record(dir, at+shift, data)
	}
	if shift == 0 {
		return nil
	}
	return out
}

// posterOfSplitFrame opens the VNC recording id on admin's player page
// with its first screen recorded in pieces (splitFirstFrame, 2 s apart), and fails
// t unless the player shows that screen before Play.
func posterOfSplitFrame(t *testing.T, admin playwright.Page, url string) {
	t.Helper()
	split := false
	must(t, admin.Route("**/api/vdi/recordings/**", func(r playwright.Route) {
		res, err := r.Fetch()
		if err != nil {
			r.Abort()
			return
		}
		body, _ := res.Body()
		if b := splitFirstFrame(body, 2000); b != nil {
			body, split = b, true
		}
		r.Fulfill(playwright.RouteFulfillOptions{Response: res, Body: body})
	}))
	defer admin.Unroute("**/api/vdi/recordings/**")
	if _, err := admin.Goto(url); err != nil {
		t.Fatal(err)
	}
	player := admin.GetByTestId("player")
	must(t, playwright.NewPlaywrightAssertions().Locator(player).ToHaveAttribute("data-state", "ready"))
	if !split {
		t.Fatal("the recording had no first screen to split (no server record of 1 KiB or more)")
	}
	poster := stableCanvas(t, admin, "#player canvas")
	if n, all := unlikeCorner(poster); n*100 < all {
		screenshot(t, admin, "vnc-poster-split")
		t.Errorf("with its first screen recorded in pieces 2 s apart, the player shows %d of %d pixels unlike its corner before Play; want that screen (at least 1%%)", n, all)
	}
}
