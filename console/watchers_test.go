package console

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
	var w Watchers
	ref := vdi.Ref{Namespace: "local", Name: "demo-1"}
	list, v0, changed := w.Snapshot(ref)
	if len(list) != 0 {
		t.Fatalf("watchers of a fresh desktop = %v; want none", list)
	}
	remove := w.Add(ref, api.Viewer{User: "boss", Role: "watch"}, nil)
	select {
	case <-changed:
	default:
		t.Fatal("adding a watcher did not wake the long poll")
	}
	list, v1, _ := w.Snapshot(ref)
	if len(list) != 1 || list[0].User != "boss" || v1 == v0 {
		t.Fatalf("after add: %v (version %d, was %d); want boss, a new version", list, v1, v0)
	}
	remove()
	if list, _, _ = w.Snapshot(ref); len(list) != 0 {
		t.Fatalf("after remove: %v; want none", list)
	}

	for _, allow := range []bool{true, false} {
		got := make(chan bool, 1)
		go func() { got <- w.Await(context.Background(), ref, api.Viewer{User: "boss", Role: "watch"}) }()
		var asking []api.Viewer
		if !eventually(2*time.Second, func() bool { asking, _, _ = w.Snapshot(ref); return len(asking) == 1 }) || asking[0].Role != RoleAsks {
			t.Fatalf("a watch waiting for consent is listed as %v; want one asking", asking)
		}
		if w.Answer(ref, "no-such-watch", true) {
			t.Error("an answer to a watch that is not waiting was taken")
		}
		if !w.Answer(ref, asking[0].ID, allow) {
			t.Fatal("the holder's answer found no waiting watch")
		}
		if ok := <-got; ok != allow {
			t.Errorf("await = %v after the holder answered %v", ok, allow)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if w.Await(ctx, ref, api.Viewer{User: "boss"}) {
		t.Error("a watch whose console went away was allowed")
	}
}

// TestWatchers_HolderEndsOnlyGrantedControl: the holder's "end" reaches
// only a console with the control they gave (Request control), never an
// admin's plain watch; the ended console's entry goes with it.
func TestWatchers_HolderEndsOnlyGrantedControl(t *testing.T) {
	var w Watchers
	ref := vdi.Ref{Namespace: "local", Name: "demo-1"}
	defer w.Add(ref, api.Viewer{User: "ops", Role: "watch"}, nil)()
	ended := 0
	removeHelper := w.Add(ref, api.Viewer{User: "boss", Role: "control"}, func() { ended++ })
	list, _, _ := w.Snapshot(ref)
	if len(list) != 2 || list[0].Granted || !list[1].Granted {
		t.Fatalf("viewers %+v; want ops's watch not granted, boss's control granted", list)
	}
	if w.End(ref, list[0].ID) {
		t.Error("the holder ended an admin's plain watch")
	}
	if !w.End(ref, list[1].ID) || ended != 1 {
		t.Errorf("end of the granted console: ended %d times; want once", ended)
	}
	removeHelper()
	if w.End(ref, list[1].ID) {
		t.Error("end found a console that closed")
	}
}
