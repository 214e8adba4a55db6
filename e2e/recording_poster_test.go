package e2e

import (
	"bytes"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"

	"github.com/corral-dev/corral-vdi-portal/relay"
)

// splitFirstFrame rewrites a corral-rfb-v1 recording (relay's reader and
// recorder) so that its first server record of 1 KiB or more, the
// desktop's first screen, comes in pieces of 1 KiB, each gap after the
// one before, and every record after them later by as much: as a busy
// machine records one update read in pieces. It returns nil when b is no
// such recording.
func splitFirstFrame(b []byte, gap time.Duration) []byte {
	var out bytes.Buffer
	var at, shift time.Duration
	rec, err := relay.NewRFBRecorder(&out, relay.RFBRecordConfig{Input: true, Now: func() time.Time { return time.Unix(0, 0).Add(at) }})
	if err != nil {
		return nil
	}
	write := func(r relay.RFBRecord) error {
		at = r.At + shift
		if r.Dir == relay.RFBClient {
			return rec.Input(r.Data)
		}
		return rec.Output(r.Data)
	}
	split := func(r relay.RFBRecord) error {
		if shift == 0 && r.Dir == relay.RFBServer && len(r.Data) >= 1024 {
			for ; len(r.Data) > 1024; r.Data = r.Data[1024:] {
				if err := write(relay.RFBRecord{Dir: r.Dir, At: r.At, Data: r.Data[:1024]}); err != nil {
					return err
				}
				shift += gap
			}
		}
		return write(r)
	}
	if _, _, _, err := relay.ReadRFBRecording(bytes.NewReader(b), split); err != nil || shift == 0 {
		return nil
	}
	return out.Bytes()
}

// posterOfSplitFrame opens the VNC recording at url on admin's player
// page with its first screen recorded in pieces 2 s apart
// (splitFirstFrame), and fails t unless the player shows that screen
// before Play.
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
		if b := splitFirstFrame(body, 2*time.Second); b != nil {
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
