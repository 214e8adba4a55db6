package auth

import (
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// A sign-out while the sign-out record cannot be read is still recorded
// (and the user told it is not saved when the write fails too); a copy of
// a cookie signed out already signs nobody out again.
func TestSignOut_Durable(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	store := &flakyRevocations{before: map[string]time.Time{}}
	a, err := New(Config{Modes: []string{ModeDev}, KeyFile: filepath.Join(t.TempDir(), "cookie.keys"), Revocations: store,
		Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	cookie := func() *http.Cookie {
		rec := httptest.NewRecorder()
		if err := a.SignIn(rec, httptest.NewRequest("POST", "/signin", nil), "alice"); err != nil {
			t.Fatal(err)
		}
		return rec.Result().Cookies()[0]
	}
	signOut := func(c *http.Cookie) error {
		r := httptest.NewRequest("POST", "/signout", nil)
		r.AddCookie(c)
		return a.SignOut(httptest.NewRecorder(), r)
	}

	old := cookie()
	now = now.Add(time.Second)
	if err := signOut(old); err != nil || !store.before["alice"].Equal(now) {
		t.Fatalf("sign-out = %v, recorded %v; want recorded at %v", err, store.before["alice"], now)
	}
	now = now.Add(time.Minute)
	fresh := cookie()
	now = now.Add(time.Second)
	if err := signOut(old); err != nil || store.before["alice"].Equal(now) {
		t.Errorf("a replayed signed-out cookie = %v, moved the sign-out to %v; want it to sign nobody out", err, store.before["alice"])
	}
	if _, ok := a.Identify(requestWith(fresh)); !ok {
		t.Error("the fresh session after a replayed old cookie's sign-out: refused; want it to stay")
	}

	store.down = true
	now = now.Add(time.Hour) // past the cache: the record cannot be read
	err = signOut(fresh)
	if vdi.ErrorCode(err) != vdi.EUnavailable {
		t.Errorf("sign-out with the database down = %v; want the user told it is not saved", err)
	}
	if _, ok := a.Identify(requestWith(fresh)); ok {
		t.Error("the signed-out cookie during the outage: accepted on this replica; want refused")
	}
}

func requestWith(c *http.Cookie) *http.Request {
	r := httptest.NewRequest("GET", "/", nil)
	r.RemoteAddr = "127.0.0.1:1"
	r.AddCookie(c)
	return r
}
