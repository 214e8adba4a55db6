package local

import (
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// guest is what runs a member: a session desktop or a QEMU VM. The backend
// records how its start ended and watches it the same way for both.
type guest interface {
	Done() <-chan struct{}
	Err() error
	// kind names it for people: "desktop" or "VM".
	kind() string
	// limits says the limits it runs under, for a failure's reason; empty
	// when it has none of its own.
	limits() string
}

func (d *Desktop) kind() string { return "desktop" }
func (v *VM) kind() string      { return "VM" }

func (d *Desktop) limits() string {
	if u := d.spec.User; u != nil {
		return u.Limits.String()
	}
	return ""
}

func (v *VM) limits() string {
	if v.user != nil {
		return v.user.Limits.String()
	}
	return ""
}

// settle records how a start of member ref ended, g running or err, and
// wakes whoever waits on the start.
func (b *Backend) settle(ref vdi.Ref, rt *member, g guest, err error) error {
	b.mu.Lock()
	if err != nil {
		rt.power, rt.reason = vdi.PowerFailed, err.Error()
	} else {
		rt.power, rt.reason = vdi.PowerRunning, ""
		rt.set(g)
		go b.watch(ref.Name, rt, g)
	}
	close(rt.ready)
	b.mu.Unlock()
	if err != nil {
		b.log.Error("member did not start", "desktop", ref, "err", err)
	}
	return err
}

// watch marks the member failed when its guest ends without being stopped.
func (b *Backend) watch(name string, rt *member, g guest) {
	<-g.Done()
	b.mu.Lock()
	defer b.mu.Unlock()
	if rt.guest() != g { // stopped on purpose
		return
	}
	rt.set(nil)
	rt.power, rt.reason = vdi.PowerFailed, "The "+g.kind()+" ended on its own"
	if err := g.Err(); err != nil {
		rt.reason += ": " + err.Error()
	}
	if l := g.limits(); l != "" {
		rt.reason += " (its limits: " + l + ")"
	}
	b.log.Warn("member failed", "desktop", Namespace+"/"+name, "reason", rt.reason)
}

// guest returns what runs the member, or nil.
func (m *member) guest() guest {
	switch {
	case m.desktop != nil:
		return m.desktop
	case m.vm != nil:
		return m.vm
	}
	return nil
}

// set makes g what runs the member; nil for nothing.
func (m *member) set(g guest) {
	m.desktop, m.vm = nil, nil
	switch g := g.(type) {
	case *Desktop:
		m.desktop = g
	case *VM:
		m.vm = g
	}
}
