package kube_test

import (
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/internal/testbrowser"
	"github.com/corral-dev/corral-vdi-portal/snapshot"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// openSharedPage opens user's invitation page of ref (/shared/...: its
// VNC console, beside the holder's) on r.
func openSharedPage(t *testing.T, br *testbrowser.Browser, user string, ref vdi.Ref, r *replica) *consolePage {
	t.Helper()
	return openPage(t, br, user, "/shared/"+ref.Namespace+"/"+ref.Name, r)
}

// samePixels waits up to 30 s for the page's VNC console to show what v
// shows, pixel for pixel, and fails t unless.
func (p *consolePage) samePixels(t *testing.T, what string, v *snapshot.Viewer) {
	t.Helper()
	n := -1
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		img, _ := v.Frame()
		if n = testbrowser.DifferingPixels(img, testbrowser.CanvasPNG(t, p.page, "#screen canvas")); n == 0 {
			return
		}
		if time.Now().After(end) {
			testbrowser.Screenshot(t, p.page, p.user+"-vnc-not-the-same")
			t.Errorf("%s: %s's VNC page differs from the consoles' picture in %d pixels (-1: in size) 30 s on; want the same pixels", what, p.user, n)
			return
		}
	}
}
