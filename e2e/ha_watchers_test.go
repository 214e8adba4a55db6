package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/corral-dev/corral-vdi-portal/api"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// viewerRow is one entry of GET …/viewers.
type viewerRow struct {
	ID, User, Role, Wants string
	Granted               bool
}

// TestHA_WhoIsWatching: the holder's "who is watching" list and notice
// hold across replicas (haScreen): alice's console is on a; erin
// (invited with control) watches through b, carol (view only) through c.
// Whichever replica alice's page asks, it lists both, with the same ETag;
// a long poll on a answers when carol leaves on c. Then the pool asks the
// holder's consent: ops's watch waits on c, alice sees it asking on a and
// allows it there, and ops's console on c opens. Request control across
// replicas (issue 58): ops asks on b, alice allows on a, ops's console on c
// opened with the grant types on the screen, and alice takes control back
// on a.
func TestHA_WhoIsWatching(t *testing.T) {
	hs := startHAScreen(t)
	a, b, c := hs.reps["a"], hs.reps["b"], hs.reps["c"]
	desktop := "/api/vdi/desktops/" + hs.ns + "/" + hs.member
	for _, inv := range []struct {
		user    string
		control bool
	}{{"erin", true}, {"carol", false}} {
		body := fmt.Sprintf(`{"user":%q,"control":%v}`, inv.user, inv.control)
		if code := a.p.APIBody(t, "alice", "POST", desktop+"/shares", body, nil); code != 201 && code != 200 {
			t.Fatalf("alice invites %s: %d", inv.user, code)
		}
	}
	// viewers asks r for the list as alice's page does; with etag, it
	// waits for a change.
	viewers := func(r *haReplica, etag string) (int, []viewerRow, string) {
		t.Helper()
		req, err := http.NewRequest("GET", r.p.URL+desktop+"/viewers", nil)
		must(t, err)
		req.Header.Set("Tailscale-User-Login", "alice")
		req.Header.Set("Accept", "application/json")
		if etag != "" {
			req.Header.Set("If-None-Match", etag)
		}
		res, err := (&http.Client{Timeout: time.Minute}).Do(req)
		must(t, err)
		defer res.Body.Close()
		var list []viewerRow
		if res.StatusCode == 200 {
			must(t, json.NewDecoder(res.Body).Decode(&list))
		}
		return res.StatusCode, list, res.Header.Get("ETag")
	}
	say := func(list []viewerRow) string {
		var s []string
		for _, v := range list {
			s = append(s, v.User+":"+v.Role)
		}
		slices.Sort(s)
		return strings.Join(s, ",")
	}

	hs.open(t, a, "alice")
	hs.open(t, b, "erin")
	carol := hs.open(t, c, "carol")
	const want = "carol:watch,erin:control"
	var tags []string
	for _, r := range []*haReplica{a, b, c} {
		code, list, tag := viewers(r, "")
		if code != 200 || say(list) != want {
			t.Errorf("alice's viewers asked on %s: %d %s; want %s", r.name, code, say(list), want)
		}
		tags = append(tags, tag)
	}
	if tags[0] == "" || tags[0] != tags[1] || tags[1] != tags[2] {
		t.Errorf("the list's ETag on a, b and c: %q; want one, the same", tags)
	}

	// A long poll on a answers when carol leaves on c.
	type answer struct {
		code int
		list []viewerRow
	}
	polled := make(chan answer, 1)
	go func() {
		code, list, _ := viewers(a, tags[0])
		polled <- answer{code, list}
	}()
	time.Sleep(time.Second) // the poll waiting; an earlier close is answered at once too
	carol.ws.Close()
	select {
	case got := <-polled:
		if got.code != 200 || say(got.list) != "erin:control" {
			t.Errorf("alice's long poll on a after carol left on c: %d %s; want erin:control", got.code, say(got.list))
		}
	case <-time.After(time.Minute):
		t.Fatal("alice's long poll on a did not answer after carol left on c")
	}

	// Consent: ops's watch waits on c until alice allows it on a.
	if code := a.p.APIBody(t, "ops", "PATCH", "/api/vdi/pools/"+hs.ns+"/scr", `{"policy":{"watch":"consent"}}`, nil); code != 200 {
		t.Fatalf("the pool asks the holder's consent: %d", code)
	}
	waitFor(t, 30*time.Second, "c to read the pool's consent policy", func() bool {
		var pools []vdi.PoolStatus
		c.p.API(t, "ops", "GET", "/api/vdi/pools", &pools)
		return slices.ContainsFunc(pools, func(p vdi.PoolStatus) bool {
			return p.Namespace == hs.ns && p.Name == "scr" && p.Policy.Watch == vdi.WatchConsent
		})
	})
	ws, res, err := dialWS(c.p, "ops", "/ws/vnc/"+hs.ns+"/"+hs.member, c.p.URL)
	if err != nil {
		t.Fatalf("ops's console on c: %v (%v)", err, status(res))
	}
	t.Cleanup(func() { ws.Close() })
	var ask viewerRow
	waitFor(t, 30*time.Second, "ops's watch asking in alice's list on a", func() bool {
		_, list, _ := viewers(a, "")
		i := slices.IndexFunc(list, func(v viewerRow) bool { return v.User == "ops" && v.Role == "asks" })
		if i >= 0 {
			ask = list[i]
		}
		return i >= 0
	})
	if code := a.p.API(t, "alice", "POST", desktop+"/viewers/"+ask.ID+"/allow", nil); code != 204 {
		t.Fatalf("alice allows ops's watch on a: %d", code)
	}
	ops := newRFBViewer(t, ws)
	if _, err := ops.screen(t); err != nil {
		t.Fatalf("ops's screen on c after alice allowed it on a: %v", err)
	}
	if _, list, _ := viewers(b, ""); say(list) != "erin:control,ops:watch" {
		t.Errorf("alice's viewers on b after ops's watch began on c: %s; want erin:control,ops:watch", say(list))
	}

	// Request control: ops asks on b; the request waits there until alice
	// allows it on a.
	type granted struct {
		code  int
		grant api.ControlGrant
	}
	asked := make(chan granted, 1)
	go func() {
		var g api.ControlGrant
		code := b.p.API(t, "ops", "POST", desktop+"/control", &g)
		asked <- granted{code, g}
	}()
	waitFor(t, 30*time.Second, "ops's request for control in alice's list on a", func() bool {
		_, list, _ := viewers(a, "")
		i := slices.IndexFunc(list, func(v viewerRow) bool { return v.User == "ops" && v.Wants == "request-control" })
		if i >= 0 {
			ask = list[i]
		}
		return i >= 0
	})
	if code := a.p.API(t, "alice", "POST", desktop+"/viewers/"+ask.ID+"/allow", nil); code != 204 {
		t.Fatalf("alice allows ops control on a: %d", code)
	}
	var got granted
	select {
	case got = <-asked:
	case <-time.After(time.Minute):
		t.Fatal("ops's request for control on b did not answer after alice allowed it on a")
	}
	if got.code != 200 || got.grant.Grant == "" || got.grant.Holder != "alice" {
		t.Fatalf("ops's request for control on b: %d %+v; want 200 and a grant from alice", got.code, got.grant)
	}
	// The grant opens ops's console with control on c: ops's keys change
	// the screen.
	ctlWS, res, err := dialWS(c.p, "ops", "/ws/vnc/"+hs.ns+"/"+hs.member+"?control="+url.QueryEscape(got.grant.Grant), c.p.URL)
	if err != nil {
		t.Fatalf("ops's console on c with the grant: %v (%v)", err, status(res))
	}
	t.Cleanup(func() { ctlWS.Close() })
	helper := newRFBViewer(t, ctlWS)
	before, err := helper.screen(t)
	must(t, err)
	helper.typeText(t, "helped")
	waitFor(t, 30*time.Second, "ops's keys to change the screen", func() bool {
		now, err := helper.screen(t)
		must(t, err)
		return now != before
	})
	var granter viewerRow
	waitFor(t, 30*time.Second, "ops's console with control in alice's list on a", func() bool {
		_, list, _ := viewers(a, "")
		i := slices.IndexFunc(list, func(v viewerRow) bool { return v.User == "ops" && v.Role == "control" && v.Granted })
		if i >= 0 {
			granter = list[i]
		}
		return i >= 0
	})
	// Alice takes control back on a: ops's console on c closes, saying so.
	if code := a.p.API(t, "alice", "POST", desktop+"/viewers/"+granter.ID+"/end", nil); code != 204 {
		t.Fatalf("alice takes control back on a: %d", code)
	}
	ctlWS.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		if _, _, err = ctlWS.ReadMessage(); err != nil {
			break
		}
	}
	if ce, ok := err.(*websocket.CloseError); !ok || !strings.Contains(ce.Text, "alice took back control") {
		t.Errorf("ops's console with control on c ended with %v; want alice taking control back", err)
	}
	waitFor(t, 30*time.Second, "ops's console with control gone from alice's list on a", func() bool {
		_, list, _ := viewers(a, "")
		return !slices.ContainsFunc(list, func(v viewerRow) bool { return v.User == "ops" && v.Role == "control" })
	})
}
