package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/relay"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// takesSeen is a Taker that answers from answer and notes each take.
type takesSeen struct {
	mu     sync.Mutex
	got    []vdi.TakeRequest
	answer func(vdi.TakeRequest) (vdi.TakeAnswer, error)
}

func (s *takesSeen) TakeForwarded(_ context.Context, req vdi.TakeRequest) (vdi.TakeAnswer, error) {
	s.mu.Lock()
	s.got = append(s.got, req)
	s.mu.Unlock()
	return s.answer(req)
}

// TestPeerTake: a claim forwarded to its shard's holder is run there once,
// as signed: its answer or its refusal comes back as it was; an unsigned,
// replayed or forged forward (another user in a body signed for one, a
// signature of another secret or for another replica) is refused with
// 401 and runs nothing.
func TestPeerTake(t *testing.T) {
	e := mustTestEnv(t, testEnvConfig{})
	secret := []byte("a-peer-secret-of-thirty-two-byte")
	takes := &takesSeen{answer: func(req vdi.TakeRequest) (vdi.TakeAnswer, error) {
		switch req.Pool {
		case "full":
			return vdi.TakeAnswer{}, vdi.Errorf(vdi.EConflict, "Try again later.", "No free desktops in pool full.")
		case "moved":
			return vdi.TakeAnswer{}, vdi.ErrNotHolder
		}
		return vdi.TakeAnswer{Lease: &vdi.Lease{Namespace: req.Namespace, Member: req.Pool + "-1", Pool: req.Pool, Holder: req.Login}, Won: true}, nil
	}}
	h := New(Config{Auth: e.auth, Assets: e.assets, Log: e.log, Takes: takes, Console: ConsoleConfig{PeerSecret: secret}})
	srv := httptest.NewServer(h)
	defer srv.Close()
	ctx := context.Background()
	fw := TakeForwarder{Secret: secret}

	a, err := fw.ForwardTake(ctx, srv.URL, vdi.TakeRequest{Login: "alice", Namespace: "ns", Pool: "p"})
	if err != nil || !a.Won || a.Lease.Member != "p-1" || a.Lease.Holder != "alice" {
		t.Errorf("forwarded claim of alice = %+v, %v; want p-1 won for her", a, err)
	}
	_, err = fw.ForwardTake(ctx, srv.URL, vdi.TakeRequest{Login: "alice", Namespace: "ns", Pool: "full"})
	if vdi.ErrorCode(err) != vdi.EConflict || err.(*vdi.Error).Msg != "No free desktops in pool full." {
		t.Errorf("forwarded claim of a full pool: %v; want the holder's refusal as it was", err)
	}
	if _, err = fw.ForwardTake(ctx, srv.URL, vdi.TakeRequest{Login: "alice", Namespace: "ns", Pool: "moved"}); !errors.Is(err, vdi.ErrNotHolder) {
		t.Errorf("forwarded claim to a replica without the shard: %v; want vdi.ErrNotHolder", err)
	}

	u, _ := url.Parse(srv.URL)
	body := []byte(`{"login":"alice","namespace":"ns","pool":"p"}`)
	signed := relay.SignPeer(secret, time.Now(), u.Host, relay.BodyKind(takeRoute, body), "", "")
	takes.mu.Lock()
	before := len(takes.got)
	takes.mu.Unlock()
	post := func(body []byte, sig string) int {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+relay.PeerPath+takeRoute, bytes.NewReader(body))
		if sig != "" {
			req.Header.Set(relay.PeerAuthHeader, sig)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if code := post(body, signed); code != http.StatusOK {
		t.Fatalf("a signed forward = %d; want 200", code)
	}
	for _, tc := range []struct {
		name string
		body []byte
		sig  string
	}{
		{"replayed", body, signed},
		{"unsigned", body, ""},
		{"another user in a body signed for alice", []byte(`{"login":"mallory","namespace":"ns","pool":"p"}`),
			relay.SignPeer(secret, time.Now(), u.Host, relay.BodyKind(takeRoute, body), "", "")},
		{"another secret", body, relay.SignPeer([]byte("not-the-peer-secret-thirty-two-b"), time.Now(), u.Host, relay.BodyKind(takeRoute, body), "", "")},
		{"for another replica", body, relay.SignPeer(secret, time.Now(), "10.0.0.9:8080", relay.BodyKind(takeRoute, body), "", "")},
		{"stale", body, relay.SignPeer(secret, time.Now().Add(-time.Minute), u.Host, relay.BodyKind(takeRoute, body), "", "")},
	} {
		if code := post(tc.body, tc.sig); code != http.StatusUnauthorized {
			t.Errorf("%s forward = %d; want 401", tc.name, code)
		}
	}
	takes.mu.Lock()
	defer takes.mu.Unlock()
	if n := len(takes.got) - before; n != 1 {
		t.Errorf("the holder ran %d takes of the raw forwards; want 1 (the signed one): %+v", n, takes.got[before:])
	}
	var logins []string
	for _, r := range takes.got {
		logins = append(logins, r.Login)
	}
	if b, _ := json.Marshal(logins); bytes.Contains(b, []byte("mallory")) {
		t.Errorf("the holder ran a take for mallory: %s", b)
	}
}
