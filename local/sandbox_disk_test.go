package local

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestSandboxedDesktop_DiskBound fills an ephemeral desktop's home and
// /tmp: each write stops at the 8 MiB bound, and the bounds come off when
// the member is wiped.
func TestSandboxedDesktop_DiskBound(t *testing.T) {
	s := MustSandbox(t, "202300-202399", Limits{NProc: 300, Disk: 8 << 20})
	spec := MustSandboxedSpec(t, s, "disk")
	member := filepath.Dir(spec.Dir)
	t.Cleanup(func() { unmountMember(member) })
	spec.Ephemeral = true
	d := MustStartDesktop(t, spec)
	term, err := d.StartTerminal()
	if err != nil {
		t.Fatal(err)
	}
	defer term.Close()
	term.Write([]byte("for f in ~/fill /tmp/fill; do dd if=/dev/zero of=$f bs=1M count=64 2>&1 | grep -c 'No space left'; du -m $f; done; echo DONE-$((40+2))\r"))
	out := readUntil(t, term, "DONE-42")
	if strings.Count(out, "1\r\n8\t") != 2 {
		t.Errorf("filling home and /tmp said %q; want both refused at the bound", out)
	}
	for _, dir := range []string{spec.Home, filepath.Join(member, memberTmpName)} {
		if !isMountpoint(dir) {
			t.Errorf("%s has no disk bound mounted", dir)
		}
	}
	d.Stop()
	if err := unmountMember(member); err != nil {
		t.Fatal(err)
	}
	if isMountpoint(spec.Home) {
		t.Error("the home's bound survived unmountMember")
	}
}
