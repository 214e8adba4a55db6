package kube

import (
	"testing"
	"time"
)

// TestCloneMoves: a clone is given up on only after it stood still for
// CloneTimeout, however long it has been running; one never read stands
// still from the start.
func TestCloneMoves(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	m := cloneMoves{last: "not read yet", since: t0}
	if got := m.still(t0.Add(CloneTimeout)); got < CloneTimeout {
		t.Errorf("never read: still %v after %v; want it standing still", got, CloneTimeout)
	}
	steps := []string{"SnapshotInProgress", "RestoreInProgress, restore r", "RestoreInProgress, restore r, disks d Pending",
		"RestoreInProgress, restore r, disks d Bound", "CreatingTargetVM, restore r, disks d Bound"}
	now := t0
	for _, s := range steps { // each step takes most of CloneTimeout: 4× it in all
		m.saw(s, now)
		now = now.Add(CloneTimeout - time.Second)
		m.saw(s, now) // read again, unchanged
		if got := m.still(now); got >= CloneTimeout {
			t.Fatalf("at %q after %v in all: still %v; want under %v (it moves)", s, now.Sub(t0), got, CloneTimeout)
		}
	}
	if got := m.still(now.Add(time.Second)); got != CloneTimeout {
		t.Errorf("unchanged for %v: still(...) = %v; want %v", CloneTimeout, got, CloneTimeout)
	}
}
