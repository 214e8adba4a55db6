package local

import (
	"context"
	"io"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// DialAudio returns the Ogg Opus sound of session desktop ref (see
// Desktop.Audio); VMs have none here.
func (b *Backend) DialAudio(ctx context.Context, ref vdi.Ref) (io.ReadCloser, error) {
	b.mu.Lock()
	rt := b.members[ref.Name]
	b.mu.Unlock()
	switch {
	case rt != nil && rt.vm != nil:
		return nil, vdi.Errorf(vdi.EInvalid, "Use a session desktop for sound.", "Not supported: %s is a VM, and the portal carries sound only from session desktops.", ref)
	case rt == nil || rt.desktop == nil:
		return nil, vdi.Errorf(vdi.EUnavailable, "Start it, then turn sound on again.", "Desktop %s is not running.", ref)
	case !rt.desktop.HasAudio():
		return nil, vdi.Errorf(vdi.EUnavailable, "Stop and start the desktop to restart its sound server; if that does not help, an admin finds why in the portal's log (\"desktop has no sound\").",
			"Desktop %s has no sound server running.", ref)
	}
	return rt.desktop.Audio(ctx)
}

// HasAudio reports whether ref is a session desktop whose sound server
// runs.
func (b *Backend) HasAudio(ctx context.Context, ref vdi.Ref) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	rt := b.members[ref.Name]
	return rt != nil && rt.desktop != nil && rt.desktop.HasAudio()
}
