package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"image/png"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
)

// TestHA_Takeover: the holder's second tab on another replica takes the
// console over as it does on one replica (haScreen): alice's console on
// a ends "taken over" when she opens the desktop on b, and b's when she
// takes it back on a ("Use it here"); of two tabs she opens at the same
// moment on b and c exactly one stays; erin, invited, watches through c
// all along; the VMI's one VNC client is never kicked. Then, on a
// KubeVirt without vnc/screenshot, ops's dashboard thumbnail asked on
// each replica is a view of the one screen (relayed from b and c to a's
// hub), not another VNC client. Last, alice's serial console comes back
// at once after its Lease's delete was refused (serialAfterAFailedRelease),
// and an admin's own serial console of the member nobody holds gives way
// to hers once she holds it (adminSerialGivesWay); then the attack rows
// on her serial line across replicas (haAttacks).
func TestHA_Takeover(t *testing.T) {
	hs := startHAScreen(t)
	a, b, c := hs.reps["a"], hs.reps["b"], hs.reps["c"]
	if code := a.p.APIBody(t, "alice", "POST", "/api/vdi/desktops/"+hs.ns+"/"+hs.member+"/shares", `{"user":"erin","control":true}`, nil); code != 201 && code != 200 {
		t.Fatalf("alice invites erin: %d", code)
	}
	screen := func(who string, v *rfbViewer) {
		t.Helper()
		if _, err := v.screen(t); err != nil {
			t.Fatalf("%s's screen: %v", who, err)
		}
	}
	first := hs.open(t, a, "alice")
	screen("alice@a", first)
	erin := hs.open(t, c, "erin")
	screen("erin@c", erin)

	second := hs.open(t, b, "alice")
	screen("alice@b", second)
	if why := closedWith(t, first, "alice's console on a after she opened the desktop on b"); !strings.HasPrefix(why, "taken over") {
		t.Errorf("alice's console on a closed with %q; want taken over", why)
	}
	screen("erin@c, after alice's takeover", erin)

	// Use it here: back on a.
	again := hs.open(t, a, "alice")
	screen("alice@a again", again)
	if why := closedWith(t, second, "alice's console on b after she took it back on a"); !strings.HasPrefix(why, "taken over") {
		t.Errorf("alice's console on b closed with %q; want taken over", why)
	}
	screen("erin@c, after alice took it back", erin)
	screen("alice@a again, after the takeover settled", again)

	// Two tabs opened at the same moment on b and c: exactly one stays
	// (the newer by the stamp its replica gave it); the other, and the
	// tab on a, end taken over.
	survivor := newestStays(t, hs, b, c)
	if why := closedWith(t, again, "alice's console on a after two newer tabs on b and c"); !strings.HasPrefix(why, "taken over") {
		t.Errorf("alice's console on a closed with %q; want taken over", why)
	}
	screen("erin@c, after the two tabs", erin)

	if n := hs.standIn.Consoles(hs.ns, hs.member, "vnc"); n.Opened != 1 || n.Kicked != 0 || n.Refused != 0 {
		t.Errorf("the VMI's VNC console: %+v; want 1 opened, none kicked or refused", n)
	}

	hs.standIn.WithoutScreenshots() // no replica has asked for one yet
	for _, r := range []*haReplica{b, c, a} {
		code, pic := r.p.thumb(t, "ops", hs.ns+"/"+hs.member)
		if img, err := png.Decode(bytes.NewReader(pic)); code != 200 || err != nil || img.Bounds().Dx() != 320 {
			t.Errorf("ops's thumbnail asked on %s: %d, %v; want a 320-wide PNG", r.name, code, err)
		}
	}
	screen("alice's surviving tab, after the thumbnails", survivor)
	if n := hs.standIn.Consoles(hs.ns, hs.member, "vnc"); n.Opened != 1 || n.Kicked != 0 || n.Refused != 0 {
		t.Errorf("the VMI's VNC console after thumbnails on every replica: %+v; want still 1 opened, none kicked or refused", n)
	}

	serialAfterAFailedRelease(t, hs, a, b)
	adminSerialGivesWay(t, hs, a, c)
	runHAAttacks(t, hs)
}

// newestStays opens alice's console on each of rs at the same moment and
// returns the one that stays: every other ends taken over, at once or
// as the newer one is recorded on the claim.
func newestStays(t *testing.T, hs *haScreen, rs ...*haReplica) *rfbViewer {
	t.Helper()
	type tab struct {
		name string
		v    *rfbViewer
		err  error
	}
	start, tabs := make(chan struct{}), make(chan tab, len(rs))
	for _, r := range rs {
		go func() {
			<-start
			ws, res, err := dialWS(r.p, "alice", "/ws/vnc/"+hs.ns+"/"+hs.member, r.p.URL)
			if err != nil {
				tabs <- tab{r.name, nil, fmt.Errorf("%w (%v)", err, status(res))}
				return
			}
			t.Cleanup(func() { ws.Close() })
			v, err := shakeRFB(ws)
			tabs <- tab{r.name, v, err}
		}()
	}
	close(start)
	open, ended := map[string]*rfbViewer{}, map[string]error{}
	for range rs {
		if x := <-tabs; x.err != nil {
			ended[x.name] = x.err
		} else {
			open[x.name] = x.v
		}
	}
	for end := time.Now().Add(testwait.D(30 * time.Second)); len(open) > 1 && time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		for name, v := range open {
			if _, err := v.screen(t); err != nil {
				ended[name] = err
				delete(open, name)
			}
		}
	}
	if len(open) != 1 {
		t.Fatalf("alice's tabs opened at once on %d replicas: %d stay (ended: %v); want exactly one", len(rs), len(open), ended)
	}
	for name, err := range ended {
		if ce := (*websocket.CloseError)(nil); !errors.As(err, &ce) || !strings.HasPrefix(ce.Text, "taken over") {
			t.Errorf("alice's tab on %s ended with %v; want taken over", name, err)
		}
	}
	for name, v := range open {
		if _, err := v.screen(t); err != nil {
			t.Fatalf("alice's tab on %s, the one that stays: %v", name, err)
		}
		t.Logf("of alice's tabs opened at once, the one on %s stays", name)
		return v
	}
	return nil
}
