package handlers

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/api"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// TestWatchers: a watch is listed while it lasts, each change closes the
// channel a long poll waits on, and a watch waiting for consent gets the
// holder's answer (and is listed as asking until then).
func TestWatchers(t *testing.T) {
	var w watchers
	ref := vdi.Ref{Namespace: "local", Name: "demo-1"}
	list, v0, changed := w.snapshot(ref)
	if len(list) != 0 {
		t.Fatalf("watchers of a fresh desktop = %v; want none", list)
	}
	remove := w.add(ref, api.Viewer{User: "boss", Role: "watch"}, nil)
	select {
	case <-changed:
	default:
		t.Fatal("adding a watcher did not wake the long poll")
	}
	list, v1, _ := w.snapshot(ref)
	if len(list) != 1 || list[0].User != "boss" || v1 == v0 {
		t.Fatalf("after add: %v (version %d, was %d); want boss, a new version", list, v1, v0)
	}
	remove()
	if list, _, _ = w.snapshot(ref); len(list) != 0 {
		t.Fatalf("after remove: %v; want none", list)
	}

	for _, allow := range []bool{true, false} {
		got := make(chan bool, 1)
		go func() { got <- w.await(context.Background(), ref, api.Viewer{User: "boss", Role: "watch"}) }()
		var asking []api.Viewer
		if !eventually(2*time.Second, func() bool { asking, _, _ = w.snapshot(ref); return len(asking) == 1 }) || asking[0].Role != roleAsks {
			t.Fatalf("a watch waiting for consent is listed as %v; want one asking", asking)
		}
		if w.answer(ref, "no-such-watch", true) {
			t.Error("an answer to a watch that is not waiting was taken")
		}
		if !w.answer(ref, asking[0].ID, allow) {
			t.Fatal("the holder's answer found no waiting watch")
		}
		if ok := <-got; ok != allow {
			t.Errorf("await = %v after the holder answered %v", ok, allow)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if w.await(ctx, ref, api.Viewer{User: "boss"}) {
		t.Error("a watch whose console went away was allowed")
	}
}

// TestWatchers_WatchingOnAnyReplica: the audio socket's consent check
// sees a watch on another replica (read over a signed peer request), and
// neither a watch still asking there nor a user who watches nowhere.
func TestWatchers_WatchingOnAnyReplica(t *testing.T) {
	e := mustTestEnv(t, testEnvConfig{})
	secret := []byte("a-peer-secret-of-thirty-two-byte")
	other := New(Config{Auth: e.auth, Assets: e.assets, Log: e.log, Console: ConsoleConfig{PeerSecret: secret}})
	srv := httptest.NewServer(other)
	defer srv.Close()
	h := New(Config{Auth: e.auth, Assets: e.assets, Log: e.log, Console: ConsoleConfig{PeerSecret: secret,
		FindPeers: func(context.Context) []string { return []string{srv.URL} }}})
	ref := vdi.Ref{Namespace: "ns", Name: "vm-1"}
	defer other.console.watchers.add(ref, api.Viewer{User: "ops", Role: "watch", Protocol: vdi.ProtocolVNC}, nil)()
	defer other.console.watchers.add(ref, api.Viewer{User: "boss", Role: "asks", Protocol: vdi.ProtocolVNC}, nil)()
	for user, want := range map[string]bool{"ops": true, "boss": false, "carol": false} {
		if got := h.console.watchingAnywhere(context.Background(), ref, user); got != want {
			t.Errorf("watchingAnywhere(%s) = %v; want %v", user, got, want)
		}
	}
}

// TestWatchers_HolderEndsOnlyGrantedControl: the holder's "end" reaches
// only a console with the control they gave (Request control), never an
// admin's plain watch; the ended console's entry goes with it.
func TestWatchers_HolderEndsOnlyGrantedControl(t *testing.T) {
	var w watchers
	ref := vdi.Ref{Namespace: "local", Name: "demo-1"}
	defer w.add(ref, api.Viewer{User: "ops", Role: "watch"}, nil)()
	ended := 0
	removeHelper := w.add(ref, api.Viewer{User: "boss", Role: "control"}, func() { ended++ })
	list, _, _ := w.snapshot(ref)
	if len(list) != 2 || list[0].Granted || !list[1].Granted {
		t.Fatalf("viewers %+v; want ops's watch not granted, boss's control granted", list)
	}
	if w.end(ref, list[0].ID) {
		t.Error("the holder ended an admin's plain watch")
	}
	if !w.end(ref, list[1].ID) || ended != 1 {
		t.Errorf("end of the granted console: ended %d times; want once", ended)
	}
	removeHelper()
	if w.end(ref, list[1].ID) {
		t.Error("end found a console that closed")
	}
}
