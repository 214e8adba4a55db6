package local

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestNewSandbox_ProbeSurvivesAMembersWipe: another portal on the host
// holds the range's first uid for a member and wipes that member
// (killUID, again and again) while this portal starts. This portal's
// userns probe runs as a uid it holds in the registry meanwhile, which no
// member has, so the wipe does not kill it; before, the probe ran as the
// range's first uid and local desktops were off ("signal: killed"). The
// real bubblewrap probes, behind a wrapper that makes it last a third of
// a second, so the wipe meets it on any machine.
func TestNewSandbox_ProbeSurvivesAMembersWipe(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("desktops run as uids of their own only in a root portal")
	}
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		t.Skip(err)
	}
	slow, _ := os.MkdirTemp("", "slow-bwrap") // a desktop uid runs it
	t.Cleanup(func() { os.RemoveAll(slow) })
	os.Chmod(slow, 0o755)
	if err := os.WriteFile(filepath.Join(slow, "bwrap"), []byte("#!/bin/sh\nsleep 0.3\nexec "+bwrap+" \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", slow+string(os.PathListSeparator)+os.Getenv("PATH"))
	const first = 202700
	registry := t.TempDir()
	other := t.TempDir() // the other portal's member
	if err := writeMemberUID(other, first); err != nil {
		t.Fatal(err)
	}
	if err := (&Sandbox{registry: registry}).register(first, other); err != nil {
		t.Fatal(err)
	}
	stop, wiped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(wiped)
		for {
			select {
			case <-stop:
				return
			default:
			}
			killUID(first, 0)
			time.Sleep(time.Millisecond)
		}
	}()
	s, err := NewSandbox(SandboxConfig{UIDs: "202700-202799", Registry: registry})
	close(stop)
	<-wiped
	if err != nil {
		t.Fatalf("a portal starting while another wipes its member of uid %d: %v; want local desktops on", first, err)
	}
	if _, err := os.Lstat(s.entry(first + 1)); err == nil {
		t.Errorf("the probe's uid %d is still held in the registry after the probe", first+1)
	}
}
