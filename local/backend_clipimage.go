package local

import (
	"context"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// HasClipboardImages reports whether ref is a session desktop of the
// backend: their X clipboard carries pictures (VMs' only text, over VNC).
func (b *Backend) HasClipboardImages(ctx context.Context, ref vdi.Ref) bool {
	return b.HasFiles(ctx, ref)
}

// ClipboardImage returns the PNG on session desktop ref's clipboard, at
// most max bytes (see Desktop.ClipboardImage).
func (b *Backend) ClipboardImage(ctx context.Context, ref vdi.Ref, max int64) ([]byte, error) {
	d, err := b.runningDesktop(ref)
	if err != nil {
		return nil, err
	}
	return d.ClipboardImage(ctx, max)
}

// SetClipboardImage puts a PNG on session desktop ref's clipboard.
func (b *Backend) SetClipboardImage(ctx context.Context, ref vdi.Ref, pic []byte) error {
	d, err := b.runningDesktop(ref)
	if err != nil {
		return err
	}
	return d.SetClipboardImage(ctx, pic)
}

// runningDesktop returns session desktop ref while it runs.
func (b *Backend) runningDesktop(ref vdi.Ref) (*Desktop, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if rt := b.members[ref.Name]; rt != nil && rt.desktop != nil {
		return rt.desktop, nil
	}
	return nil, vdi.Errorf(vdi.EUnavailable, "Start it, then try again.", "Desktop %s is not running.", ref)
}
