package kube

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// A claim reads its CT pool's ConfigMap several times (the pool where it
// arrives and where it runs, the members, the desktop it answers with),
// and the standby's refill at every claim's event reads it again: its
// policy, access and standby JSON each time, a twentieth of the portals'
// CPU in a morning storm of a 1,000-member pool. A ConfigMap at one
// resourceVersion always reads alike, so it is read once per version and
// the pool shared by every caller: read-only, as the members' names are
// (cts_members.go).

// parsedMemoCap bounds the versions kept: every write of a pool's
// ConfigMap makes a new one.
const parsedMemoCap = 256

var parsedMemo = struct {
	sync.Mutex
	byVersion map[parsedVersion]parsedPool
}{byVersion: map[parsedVersion]parsedPool{}}

// parsedVersion is one version of one ConfigMap.
type parsedVersion struct {
	uid types.UID
	rv  string
}

// parsedPool is what readCTPool made of a version.
type parsedPool struct {
	p   *ctPool
	err error
}

// parseCTPool returns readCTPool of cm, shared with every caller that
// read the same version: the caller must not change it. A ConfigMap with
// no version yet (not from the API server) is read each time.
func parseCTPool(cm *corev1.ConfigMap) (*ctPool, error) {
	if cm.UID == "" || cm.ResourceVersion == "" {
		return readCTPool(cm)
	}
	v := parsedVersion{cm.UID, cm.ResourceVersion}
	parsedMemo.Lock()
	got, ok := parsedMemo.byVersion[v]
	parsedMemo.Unlock()
	if ok {
		return got.p, got.err
	}
	p, err := readCTPool(cm)
	parsedMemo.Lock()
	defer parsedMemo.Unlock()
	if len(parsedMemo.byVersion) >= parsedMemoCap {
		clear(parsedMemo.byVersion)
	}
	parsedMemo.byVersion[v] = parsedPool{p, err}
	return p, err
}
