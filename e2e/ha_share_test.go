package e2e

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// TestHA_ShareEndsEverywhere: an invitation revoked, or the desktop
// released, on one replica closes the invitee's console on another at
// once (the other replica's Lease watch sees the claim change; its
// periodic check is only the backstop), with the reason; and what the
// invitee tries next, on any replica, is refused. Alice holds the
// screen on a; erin (control) watches on b, carol (view only) on c.
// The times are logged, not asserted.
func TestHA_ShareEndsEverywhere(t *testing.T) {
	hs := startHAScreen(t)
	a, b, c := hs.reps["a"], hs.reps["b"], hs.reps["c"]
	desktop := "/api/vdi/desktops/" + hs.ns + "/" + hs.member
	invite := func(user string, control bool) string {
		t.Helper()
		var sh struct{ ID string }
		body := fmt.Sprintf(`{"user":%q,"control":%v}`, user, control)
		if code := a.p.APIBody(t, "alice", "POST", desktop+"/shares", body, &sh); code != 201 && code != 200 || sh.ID == "" {
			t.Fatalf("alice invites %s: %d %+v", user, code, sh)
		}
		return sh.ID
	}
	erinShare := invite("erin", true)
	invite("carol", false)
	alice := hs.open(t, a, "alice")
	erin, carol := hs.open(t, b, "erin"), hs.open(t, c, "carol")
	for who, v := range map[string]*rfbViewer{"alice@a": alice, "erin@b": erin, "carol@c": carol} {
		if _, err := v.screen(t); err != nil {
			t.Fatalf("%s's screen: %v", who, err)
		}
	}

	// Revoked on a: erin's console on b closes.
	revoked := time.Now()
	if code := a.p.API(t, "alice", "DELETE", desktop+"/shares/"+erinShare, nil); code != 204 {
		t.Fatalf("alice revokes erin's invitation on a: %d", code)
	}
	why := closedWith(t, erin, "erin's console on b after alice revoked her invitation on a")
	t.Logf("erin's console on b closed %v after the revocation on a: %q", time.Since(revoked).Round(time.Millisecond), why)
	if !strings.Contains(why, "revoked") {
		t.Errorf("erin's console closed with %q; want the invitation's end", why)
	}

	// Released on a: carol's console on c closes.
	released := time.Now()
	if code := a.p.API(t, "alice", "POST", desktop+"/release", nil); code != 200 {
		t.Fatalf("alice releases the desktop on a: %d", code)
	}
	why = closedWith(t, carol, "carol's console on c after alice released the desktop on a")
	t.Logf("carol's console on c closed %v after the release on a: %q", time.Since(released).Round(time.Millisecond), why)
	if !strings.Contains(why, "released") {
		t.Errorf("carol's console closed with %q; want the invitation's end", why)
	}

	// The attacker's next moves: a revoked invitee, or one whose host
	// released the desktop, opens nothing on any replica.
	for _, row := range []struct {
		name, user, path string
		r                *haReplica
	}{
		{"RevokedInviteeReopensOnTheSameReplica", "erin", "/ws/vnc/", b},
		{"RevokedInviteeReopensOnTheOwner", "erin", "/ws/vnc/", a},
		{"RevokedInviteeJoinsTheSerialElsewhere", "erin", "/ws/serial/", c},
		{"InviteeOfAReleasedDesktopReopens", "carol", "/ws/vnc/", c},
		{"InviteeOfAReleasedDesktopOnAnotherReplica", "carol", "/ws/vnc/", b},
	} {
		t.Run(row.name, func(t *testing.T) {
			ws, res, err := dialWS(row.r.p, row.user, row.path+hs.ns+"/"+hs.member, row.r.p.URL)
			if err == nil {
				ws.Close()
				t.Fatalf("%s's console on %s opened; want it refused", row.user, row.r.name)
			}
			if res == nil || res.StatusCode != 403 {
				t.Errorf("%s's console on %s: %v (%v); want 403", row.user, row.r.name, err, status(res))
			}
		})
	}
}

// closedWith waits (a minute at most) for v's console to close, and
// returns the close frame's reason.
func closedWith(t *testing.T, v *rfbViewer, what string) string {
	t.Helper()
	err := v.end(time.Now().Add(time.Minute))
	var ce *websocket.CloseError
	if !errors.As(err, &ce) {
		t.Fatalf("%s: %v; want a close frame with a reason", what, err)
	}
	return ce.Text
}
