package console

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/corral-dev/corral-vdi-portal/api"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// Watchers keeps who, other than the holder, has a console of each
// desktop open on this replica (an admin watching or helping, an
// invitee, an agent), so that the holder's console page says so within
// a second. The zero value is ready.
type Watchers struct {
	mu sync.Mutex
	by map[vdi.Ref]*watched
}

// watched is one desktop's watchers, a version that counts changes, and
// a channel closed (and replaced) at each change for long polls; asks
// holds the holder's answer channel of each watch waiting for consent.
type watched struct {
	list    []api.Viewer
	version uint64
	changed chan struct{}
	asks    map[string]chan bool
	ends    map[string]func() // of the consoles the holder may end (Granted)
}

func (w *Watchers) get(ref vdi.Ref) *watched {
	if w.by == nil {
		w.by = map[vdi.Ref]*watched{}
	}
	d := w.by[ref]
	if d == nil {
		d = &watched{changed: make(chan struct{}), version: 1}
		w.by[ref] = d
	}
	return d
}

// bump publishes a change of d.
func (d *watched) bump() {
	d.version++
	close(d.changed)
	d.changed = make(chan struct{})
}

// Touch wakes the long polls of ref's viewers: something they show
// besides the list changed (an agent's oversight, through this replica).
func (w *Watchers) Touch(ref vdi.Ref) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.get(ref).bump()
}

// Watching reports whether user has a console of ref open that the
// holder let them watch (a watch waiting for consent does not count).
func (w *Watchers) Watching(ref vdi.Ref, user string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.ContainsFunc(w.get(ref).list, Watches(user))
}

// Watches returns whether a viewer is user with a console the holder let
// them watch.
func Watches(user string) func(api.Viewer) bool {
	return func(v api.Viewer) bool { return v.User == user && (v.Role == "watch" || v.Role == "control") }
}

// Add notes v on ref's console until the returned func is called; end,
// when not nil, is how the holder ends that console (answer "end").
func (w *Watchers) Add(ref vdi.Ref, v api.Viewer, end func()) (remove func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	d := w.get(ref)
	v.ID = watcherIDs + strconv.FormatUint(d.version, 10) + "-" + strconv.Itoa(len(d.list))
	v.Granted = end != nil
	d.list = append(d.list, v)
	if end != nil {
		if d.ends == nil {
			d.ends = map[string]func(){}
		}
		d.ends[v.ID] = end
	}
	d.bump()
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		d := w.get(ref)
		d.list = slices.DeleteFunc(d.list, func(x api.Viewer) bool { return x.ID == v.ID })
		delete(d.ends, v.ID)
		d.bump()
		if len(d.list) == 0 && d.version > 1<<62 {
			delete(w.by, ref) // keep versions growing; drop only what cannot wrap
		}
	}
}

// watcherIDs starts the ID of each watch on this replica, so that the
// holder's answer finds the one replica where a watch waits.
var watcherIDs = NewID()[:8] + "-"

// consentWait is how long a watch waits for the holder's answer.
const consentWait = 60 * time.Second

// RoleAsks marks a watch waiting for the holder's consent.
const RoleAsks = "asks"

// Await lists v as asking to watch ref and waits for the holder's answer,
// a minute or ctx; it reports whether the holder allowed it.
func (w *Watchers) Await(ctx context.Context, ref vdi.Ref, v api.Viewer) bool {
	return w.AwaitFor(ctx, ref, v, consentWait)
}

// AwaitFor is Await waiting at most wait.
func (w *Watchers) AwaitFor(ctx context.Context, ref vdi.Ref, v api.Viewer, wait time.Duration) bool {
	v.Role, v.Wants = RoleAsks, v.Role
	remove := w.Add(ref, v, nil)
	defer remove()
	w.mu.Lock()
	d := w.get(ref)
	id := d.list[len(d.list)-1].ID
	answer := make(chan bool, 1)
	if d.asks == nil {
		d.asks = map[string]chan bool{}
	}
	d.asks[id] = answer
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		delete(w.get(ref).asks, id)
		w.mu.Unlock()
	}()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case ok := <-answer:
		return ok
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}

// Answer gives the holder's answer to the watch id of ref; it reports
// whether such a watch was waiting.
func (w *Watchers) Answer(ref vdi.Ref, id string, allow bool) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	c, ok := w.get(ref).asks[id]
	if ok {
		c <- allow
		delete(w.get(ref).asks, id)
	}
	return ok
}

// End ends the console id of ref that the holder may end (Add's end);
// it reports whether such a console is open here.
func (w *Watchers) End(ref vdi.Ref, id string) bool {
	w.mu.Lock()
	end, ok := w.get(ref).ends[id]
	w.mu.Unlock()
	if ok {
		end()
	}
	return ok
}

// Snapshot returns ref's watchers, their version, and a channel closed at
// the next change.
func (w *Watchers) Snapshot(ref vdi.Ref) ([]api.Viewer, uint64, <-chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	d := w.get(ref)
	return slices.Clone(d.list), d.version, d.changed
}
