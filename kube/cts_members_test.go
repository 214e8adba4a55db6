package kube

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestParseCTPool_SharesNumberedMembers checks that parses of one
// size-declared definition share its member names (made once), that a
// resize's definition has its own, and that an append to a parse's list
// (as a resize makes) cannot write into the shared one.
func TestParseCTPool_SharesNumberedMembers(t *testing.T) {
	cm := func(size string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: CTConfigMapName("shared"), Labels: map[string]string{LabelCTPool: "shared"}},
			Data: map[string]string{CTKeyImage: "debian:12", CTKeySize: size}}
	}
	parse := func(size string) *ctPool {
		t.Helper()
		p, err := parseCTPool(cm(size))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	a, b := parse("3"), parse("3")
	if want := []string{"shared-1", "shared-2", "shared-3"}; !slices.Equal(a.members, want) {
		t.Fatalf("members = %v; want %v", a.members, want)
	}
	if &a.members[0] != &b.members[0] || !a.has("shared-2") || a.has("shared-4") {
		t.Errorf("two parses of one definition: members at %p and %p, has(shared-2) %v, has(shared-4) %v; want one list, true, false",
			&a.members[0], &b.members[0], a.has("shared-2"), a.has("shared-4"))
	}
	if cap(a.members) != len(a.members) {
		t.Errorf("the shared members have room for %d more; want none, so that an append (a resize's) copies them", cap(a.members)-len(a.members))
	}
	if grown := parse("4"); !slices.Equal(grown.members, []string{"shared-1", "shared-2", "shared-3", "shared-4"}) {
		t.Errorf("size 4 gives %v; want its own four", grown.members)
	}
}
