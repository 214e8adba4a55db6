package e2e

import (
	be "encoding/binary"
	"hash/crc32"
	"image/color"
	"net/http"
	"strings"
	"testing"
)

// clipImageAttacks are the attack rows of the clipboard panel's pictures:
// only the holder (and invitees with control) move them, only the way
// the pool's clipboard policy allows, only PNGs within the size limit,
// only from the portal's own pages, and not as fast as a script can.
func clipImageAttacks() []attack {
	clipOf := func(member string) string { return "/api/vdi/desktops/local/" + member + "/clipboard/image" }
	pic := string(testPicture(16, 16, color.NRGBA{1, 2, 3, 255}))
	put := func(t *testing.T, a *arena, user, body string, header ...string) *http.Response {
		return a.do(t, "PUT", clipOf(a.victim), body, append([]string{"Tailscale-User-Login", user, "Content-Type", "image/png"}, header...)...)
	}
	return []attack{
		{
			name: "ClipImageIntoAnotherUsersDesktop",
			attack: func(t *testing.T, a *arena) *http.Response {
				return put(t, a, "mallory", pic)
			},
			status: 403, says: "not yours",
		},
		{
			name: "ClipImageOutOfAnotherUsersDesktop",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "GET", clipOf(a.victim), "", "Tailscale-User-Login", "mallory")
			},
			status: 403, says: "not yours",
		},
		{
			name: "ClipImageOversized",
			attack: func(t *testing.T, a *arena) *http.Response {
				return put(t, a, "alice", strings.Repeat("x", 17<<20))
			},
			status: 413, says: "16 MiB",
		},
		{
			name: "ClipImageNotAPNG",
			attack: func(t *testing.T, a *arena) *http.Response {
				return put(t, a, "alice", "GIF89a\x01\x00\x01\x00 a gif, not a png")
			},
			status: 400, says: "Not a PNG",
		},
		{
			// 32767×32767 in a few hundred bytes: every program that
			// pasted it would allocate 4 GiB.
			name: "ClipImageDecompressionBomb",
			attack: func(t *testing.T, a *arena) *http.Response {
				return put(t, a, "alice", string(hugeCanvas(testPicture(16, 16, color.NRGBA{1, 2, 3, 255}))))
			},
			status: 413, says: "megapixels",
		},
		{
			name: "ClipImageByAViewOnlyInvitee",
			setup: func(t *testing.T, a *arena) {
				var sh struct{ ID string }
				if code := a.p.APIBody(t, "alice", "POST", "/api/vdi/desktops/local/"+a.victim+"/shares", `{"user":"carol"}`, &sh); code != 201 {
					t.Fatalf("alice invites carol: %d", code)
				}
				a.state["clip-share"] = sh.ID
			},
			attack: func(t *testing.T, a *arena) *http.Response {
				if res := a.do(t, "GET", clipOf(a.victim), "", "Tailscale-User-Login", "carol"); res.StatusCode != 403 {
					t.Errorf("carol, view only, reads alice's clipboard picture: %d; want 403", res.StatusCode)
				}
				return put(t, a, "carol", pic)
			},
			status: 403, says: "view only",
			after: func(t *testing.T, a *arena, _ *http.Response, _ string) {
				a.p.API(t, "alice", "DELETE", "/api/vdi/desktops/local/"+a.victim+"/shares/"+a.state["clip-share"].(string), nil)
			},
		},
		{
			// An admin beside the holder watches, view only: his console
			// page shows no Clipboard, and the route refuses him too.
			name: "ClipImageByAnAdminBeside",
			attack: func(t *testing.T, a *arena) *http.Response {
				if res := a.do(t, "GET", clipOf(a.victim), "", "Tailscale-User-Login", admin); res.StatusCode != 403 {
					t.Errorf("an admin reads alice's clipboard picture: %d; want 403", res.StatusCode)
				}
				return put(t, a, admin, pic)
			},
			status: 403, says: "invite you with control",
		},
		{
			name: "ClipImageFromACrossSitePage",
			attack: func(t *testing.T, a *arena) *http.Response {
				return put(t, a, "alice", pic, "Origin", "http://evil.example", "Sec-Fetch-Site", "cross-site")
			},
			status: 403,
		},
		{
			// Another site's <img> pointing at alice's picture: it cannot
			// read it, but each read runs programs in her desktop and
			// writes an audit row, and a proxy adds her identity anyway.
			name: "ClipImageReadForACrossSiteImg",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "GET", clipOf(a.victim), "", "Tailscale-User-Login", "alice",
					"Sec-Fetch-Site", "cross-site", "Sec-Fetch-Dest", "image")
			},
			status: 403, says: "another site",
		},
		{
			// The pool lets the clipboard carry out of the desktop only:
			// a picture in is refused, whatever the page offers.
			name: "ClipImagePastAFromDesktopPolicy",
			setup: func(t *testing.T, a *arena) {
				if code := a.p.APIBody(t, admin, "PATCH", "/api/vdi/pools/local/demo", `{"policy":{"clipboard":"from-desktop"}}`, nil); code != 200 {
					t.Fatalf("admin sets the clipboard from-desktop: %d", code)
				}
			},
			attack: func(t *testing.T, a *arena) *http.Response {
				return put(t, a, "alice", pic)
			},
			status: 403, says: "into the desktop",
			after: func(t *testing.T, a *arena, _ *http.Response, _ string) {
				defer a.p.APIBody(t, admin, "PATCH", "/api/vdi/pools/local/demo", `{"policy":{}}`, nil)
				if code := a.p.APIBody(t, admin, "PATCH", "/api/vdi/pools/local/demo", `{"policy":{"clipboard":"to-desktop"}}`, nil); code != 200 {
					t.Fatalf("admin sets the clipboard to-desktop: %d", code)
				}
				if res := a.do(t, "GET", clipOf(a.victim), "", "Tailscale-User-Login", "alice"); res.StatusCode != 403 {
					t.Errorf("alice reads her clipboard picture past a to-desktop policy: %d; want 403", res.StatusCode)
				}
			},
		},
		{
			// Each picture runs programs in the desktop: a script's
			// stream of them is cut off (last: it uses alice's bucket up).
			name: "ClipImageFlood",
			attack: func(t *testing.T, a *arena) *http.Response {
				var res *http.Response
				for range 15 {
					if res = put(t, a, "alice", "not a png"); res.StatusCode == 429 {
						break
					}
					res.Body.Close()
				}
				return res
			},
			status: 429, says: "pictures",
		},
	}
}

// hugeCanvas returns pic with its header claiming 32767×32767 pixels.
func hugeCanvas(pic []byte) []byte {
	huge := append([]byte{}, pic...)
	copy(huge[16:24], []byte{0, 0, 0x7f, 0xff, 0, 0, 0x7f, 0xff}) // IHDR's width and height
	be.BigEndian.PutUint32(huge[29:], crc32.ChecksumIEEE(huge[12:29]))
	return huge
}
