package kube

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestParseCTPool_OncePerVersion: a ConfigMap at one version is read
// once and the pool shared; a new version (an admin's edit, the portal's
// own write) is read again and says what changed; one with no version
// (not from the API server) is read each time.
func TestParseCTPool_OncePerVersion(t *testing.T) {
	cm := func(rv, standby string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: CTConfigMapName("memo"), UID: "memo-uid", ResourceVersion: rv,
			Labels: map[string]string{LabelCTPool: "memo"}},
			Data: map[string]string{CTKeyImage: "debian:12", CTKeySize: "3", CTKeyStandby: standby}}
	}
	parse := func(c *corev1.ConfigMap) *ctPool {
		t.Helper()
		p, err := parseCTPool(c)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, b := parse(cm("5", "1")), parse(cm("5", "1"))
	if a != b {
		t.Errorf("two reads of version 5: pools at %p and %p; want one, read once", a, b)
	}
	if c := parse(cm("6", "2")); c == a || c.Standby.Max != 2 {
		t.Errorf("version 6 (standby 2): pool %p (version 5's %p), standby %v; want its own, standby 2", c, a, c.Standby)
	}
	if x, y := parse(cm("", "1")), parse(cm("", "1")); x == y {
		t.Errorf("two reads of a ConfigMap with no version gave one pool; want each read")
	}
	bad := cm("7", "1")
	bad.Data[CTKeyMode] = "sometimes"
	if _, err := parseCTPool(bad); err == nil {
		t.Error("version 7 with mode sometimes read; want its error")
	}
	if _, err := parseCTPool(bad); err == nil {
		t.Error("version 7 read again without its error; want the error each time")
	}
}
