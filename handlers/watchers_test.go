package handlers

import (
	"context"
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
	remove := w.add(ref, api.Viewer{User: "boss", Role: "watch"})
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
