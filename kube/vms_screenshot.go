package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// resourceScreenshot is how virt-api (KubeVirt 1.7 on) lists the
// screenshot subresource in its discovery document.
const resourceScreenshot = "virtualmachineinstances/vnc/screenshot"

// maxScreenshot bounds the PNG read from the apiserver: a 4096×2304
// screen of noise compresses to about 36 MiB.
const maxScreenshot = 40 << 20

// How long a discovery answer is believed: a cluster that has the
// subresource keeps it (a downgrade is rare, and a failed screenshot falls
// back anyway); one that lacks it is asked again soon, so that an upgrade
// shows within a minute.
const (
	screenshotsKnownFor = 10 * time.Minute
	noScreenshotsFor    = time.Minute
)

// screenshotSupport caches whether the cluster's virt-api serves
// vnc/screenshot. The zero value knows nothing.
type screenshotSupport struct {
	mu    sync.Mutex
	ok    bool
	until time.Time
}

// Screenshot returns a PNG of the member's VMI's display through
// virt-api's vnc/screenshot (KubeVirt 1.7 on), which reads the display
// without opening a VNC session, so the holder's console stays connected;
// the vnc subresource would kick it (one VNC client per VMI). On a cluster
// whose virt-api does not list the subresource (older KubeVirt, or its
// discovery failing), the error wraps vdi.ErrNoScreenshot and the caller
// dials VNC instead. The cursor is not moved: that would be input on the
// holder's desktop. RBAC: the apiserver authorizes the path as the vnc
// subresource (it reads one segment after the name), so the portal's get
// on virtualmachineinstances/vnc covers it.
func (v *VMs) Screenshot(ctx context.Context, ref vdi.Ref) ([]byte, error) {
	if !v.screenshots(ctx) {
		return nil, fmt.Errorf("kube: this cluster's virt-api has no %s (KubeVirt 1.7 adds it): %w", resourceScreenshot, vdi.ErrNoScreenshot)
	}
	body, err := v.sub.Get().Namespace(ref.Namespace).Resource("virtualmachineinstances").Name(ref.Name).
		SubResource("vnc", "screenshot").Param("moveCursor", "false").Stream(ctx)
	if err != nil {
		return nil, fmt.Errorf("kube: screenshot of VMI %s through the apiserver: %w", ref, err)
	}
	defer body.Close()
	b, err := io.ReadAll(io.LimitReader(body, maxScreenshot+1))
	if err != nil {
		return nil, fmt.Errorf("kube: read the screenshot of VMI %s: %w", ref, err)
	}
	if len(b) > maxScreenshot {
		return nil, fmt.Errorf("kube: the screenshot of VMI %s is larger than %d MiB", ref, maxScreenshot>>20)
	}
	return b, nil
}

// screenshots reports whether virt-api lists vnc/screenshot, from the
// cache or the subresource group's discovery document.
func (v *VMs) screenshots(ctx context.Context) bool {
	s := &v.shots
	s.mu.Lock()
	defer s.mu.Unlock()
	if time.Now().Before(s.until) {
		return s.ok
	}
	s.ok = v.discoverScreenshots(ctx)
	s.until = time.Now().Add(noScreenshotsFor)
	if s.ok {
		s.until = time.Now().Add(screenshotsKnownFor)
	}
	return s.ok
}

func (v *VMs) discoverScreenshots(ctx context.Context) bool {
	raw, err := v.sub.Get().AbsPath("/apis", kubevirtv1.SubresourceGroupVersions[0].Group, kubevirtv1.SubresourceGroupVersions[0].Version).Do(ctx).Raw()
	if err != nil {
		return false
	}
	var list metav1.APIResourceList
	if json.Unmarshal(raw, &list) != nil {
		return false
	}
	for _, r := range list.APIResources {
		if r.Name == resourceScreenshot {
			return true
		}
	}
	return false
}
