package testpg

import (
	"syscall"
	"testing"
)

// TestShared_RestartsAServerThatEnded: a shared server that something
// else stopped is replaced, so the next test gets one that answers.
func TestShared_RestartsAServerThatEnded(t *testing.T) {
	defer Stop()
	first := Shared(t)
	first.Exec(t, "postgres", "SELECT 1")
	if err := first.cmd.Process.Signal(syscall.SIGQUIT); err != nil { // immediate shutdown
		t.Fatal(err)
	}
	<-first.exited
	if first.running() {
		t.Fatal("running after it was reaped")
	}
	second := Shared(t)
	if second == first {
		t.Fatal("Shared returned the server that had ended")
	}
	second.Exec(t, "postgres", "SELECT 1")
	second.NewDatabase(t)
}
