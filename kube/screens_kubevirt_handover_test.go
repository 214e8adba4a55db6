package kube_test

import (
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/corral-dev/corral-vdi-portal/console"
	"github.com/corral-dev/corral-vdi-portal/snapshot"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// closeFrames holds how the portal closed each console watch opened
// (*snapshot.Viewer -> *closeFrame): the viewer's connection reads a
// normal close or "going away" as the stream's end, without its words.
var closeFrames sync.Map

// closeFrame is the close frame a console's websocket got, if any.
type closeFrame struct {
	got atomic.Pointer[websocket.CloseError]
}

// closedWith waits up to 30 s for v to end and returns the close frame
// the portal sent it (nil for none).
func closedWith(t *testing.T, who string, v *snapshot.Viewer) *websocket.CloseError {
	t.Helper()
	select {
	case <-v.Done():
	case <-time.After(30 * time.Second):
		t.Fatalf("%s's console still open after 30 s; want it closed", who)
	}
	if f, ok := closeFrames.Load(v); ok {
		return f.(*closeFrame).got.Load()
	}
	return nil
}

// secondTabTakenOver: alice, whose console of ref is open on from, opens
// it in a second tab on to: the first ends "taken over", as on one
// replica, and erin's console stays open. It returns the second tab.
func secondTabTakenOver(t *testing.T, from, to *replica, ref vdi.Ref, first, erin *snapshot.Viewer) *snapshot.Viewer {
	t.Helper()
	second := to.mustWatch(t, ref, "alice")
	if ce := closedWith(t, "alice's first tab on "+from.name, first); ce == nil || !strings.HasPrefix(ce.Text, "taken over") {
		t.Errorf("alice's first tab on %s ended with %v (%v) after she opened a second on %s; want taken over", from.name, ce, first.Err(), to.name)
	}
	if err := erin.Err(); err != nil {
		t.Errorf("erin's console closed when alice opened a second tab: %v; want it open", err)
	}
	return second
}

// screenOwner returns which of rs owns ref's screen, by the URL its
// owner Lease (in the portal's namespace ns) records.
func screenOwner(t *testing.T, s *kubeVirtSetup, ref vdi.Ref, rs ...*replica) *replica {
	t.Helper()
	var leases coordinationv1.LeaseList
	if err := s.admin.List(s.ctx, &leases, client.InNamespace(s.ns), client.MatchingLabels{"corral.dev/vdi-screen": "owner"}); err != nil {
		t.Fatal(err)
	}
	for _, l := range leases.Items {
		if l.Annotations["corral.dev/vdi-screen-of"] != ref.String() {
			continue
		}
		for _, r := range rs {
			if l.Annotations["corral.dev/vdi-peer-url"] == r.url {
				return r
			}
		}
		t.Fatalf("the screen of %s is owned by %s, none of the replicas", ref, l.Annotations["corral.dev/vdi-peer-url"])
	}
	t.Fatalf("the screen of %s has no owner Lease", ref)
	return nil
}

// drainHandsOver: the replica owning ref's screen (one of rs) drains
// (SIGTERM): every open console of the screen (vs, on any replica) ends
// with 1012 and the words that say the screen moves; opened again on
// another replica they show the screen, its new owner's. It returns the
// replica that drained and the consoles opened again, by who.
func drainHandsOver(t *testing.T, s *kubeVirtSetup, ref vdi.Ref, vs map[string]*snapshot.Viewer, rs ...*replica) (*replica, map[string]*snapshot.Viewer) {
	t.Helper()
	owner := screenOwner(t, s, ref, rs...)
	drained := time.Now()
	if err := owner.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for who, v := range vs {
		if ce := closedWith(t, who, v); ce == nil || ce.Code != websocket.CloseServiceRestart || ce.Text != console.ScreenMoves {
			t.Errorf("%s's console ended with %v (%v) when %s (the screen's owner) drained; want 1012 %q", who, ce, v.Err(), owner.name, console.ScreenMoves)
		}
	}
	to := other(owner, rs...)
	again := map[string]*snapshot.Viewer{}
	var all []*snapshot.Viewer
	for who := range vs {
		again[who] = to.mustWatch(t, ref, who)
		all = append(all, again[who])
	}
	samePicture(t, "after "+owner.name+" drained, everyone on "+to.name, all...)
	t.Logf("the screen showed again on %s %v after %s (its owner) drained", to.name, time.Since(drained).Round(time.Millisecond), owner.name)
	return owner, again
}

// other returns the last of rs that is not r.
func other(r *replica, rs ...*replica) *replica {
	var o *replica
	for _, x := range rs {
		if x != r {
			o = x
		}
	}
	return o
}
