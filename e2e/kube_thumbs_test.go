package e2e

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"io"
	"net/http"
	"testing"

	"github.com/corral-dev/corral-vdi-portal/internal/testcluster"
)

// TestKube_AdminThumbnailFromScreenshot: the dashboard's picture of a
// running KubeVirt VM comes from vnc/screenshot (KubeVirt 1.7 on) through
// the real binary's wiring, so it kicks no holder's console; a user who
// is not an admin gets none.
func TestKube_AdminThumbnailFromScreenshot(t *testing.T) {
	e := startKubeEnv(t)
	member := e.runningMember(t, "thumb")
	code, pic := e.portal.thumb(t, "ops", e.ns+"/"+member)
	if code != 200 {
		t.Fatalf("GET thumbnail as ops: %d %q", code, pic)
	}
	img, err := png.Decode(bytes.NewReader(pic))
	if err != nil || img.Bounds().Dx() != 320 {
		t.Fatalf("thumbnail: %v; want a 320-wide PNG", err)
	}
	if n := e.standIn.Screenshots(e.ns, member); n != 1 {
		t.Errorf("the stand-in served %d screenshots of %s; want 1 (the thumbnail came over VNC)", n, member)
	}
	if code, _ := e.portal.thumb(t, "carol", e.ns+"/"+member); code != http.StatusForbidden && code != http.StatusNotFound {
		t.Errorf("GET thumbnail as carol (not an admin): %d; want 403 or 404", code)
	}
}

// runningMember makes a pool of one from a golden VM, has carol claim it
// (which starts it) and returns its name.
func (e *kubeEnv) runningMember(t *testing.T, pool string) string {
	t.Helper()
	testcluster.StoppedVM(t, e.admin, e.ns, pool+"-golden", nil)
	body := fmt.Sprintf(`{"namespace":%q,"name":%q,"kind":"vm","mode":"persistent","source":%q,"size":1}`, e.ns, pool, pool+"-golden")
	if code := e.portal.CreatePool(t, "ops", body, nil); code != 201 {
		t.Fatalf("create pool %s: %d", pool, code)
	}
	d := e.portal.claimRunning(t, "carol", e.ns, pool)
	return d.Name
}

// thumb GETs the dashboard's thumbnail of desktop ns/member as user.
func (p *Portal) thumb(t *testing.T, user, desktop string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), "GET", p.URL+"/admin/thumbs/"+desktop, nil)
	must(t, err)
	req.Header.Set("Tailscale-User-Login", user)
	res, err := http.DefaultClient.Do(req)
	must(t, err)
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b
}
