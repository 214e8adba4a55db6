package portal

import (
	"bytes"
	"strings"
	"testing"
)

// TestVersion: what the linker sets is what `version` prints; without it
// the binary still says something an operator can report.
func TestVersion(t *testing.T) {
	defer func(v, c string) { version, commit = v, c }(version, commit)
	version, commit = "", ""
	if v := Version(); v.Version == "" || v.Commit == "" || !strings.HasPrefix(v.Go, "go") {
		t.Fatalf("Version() with nothing linked in = %+v; want devel/unknown rather than empty", v)
	}
	version, commit = "v0.3.0", "0123abc"
	var out bytes.Buffer
	PrintVersion(&out)
	if got := out.String(); !strings.HasPrefix(got, "corral-vdi-portal v0.3.0 (commit 0123abc, go") {
		t.Fatalf("PrintVersion = %q", got)
	}
}
