package soak

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// fuzzTargets are the fuzz targets of every parser that reads network
// input; `make fuzz` runs each for longer.
var fuzzTargets = []struct{ pkg, name string }{
	{"./relay", "FuzzUnmarshalRDCleanPath"},
	{"./relay", "FuzzRFBInput"},
	{"./relay", "FuzzRDPInput"},
	{"./relay", "FuzzParseResize"},
	{"./relay", "FuzzCheckPeerAuth"},
	{"./handlers", "FuzzAPIBodies"},
	{"./handlers", "FuzzOIDCCallback"},
}

var execsRE = regexp.MustCompile(`execs: (\d+)`)

// fuzzPhase runs each target for sc.FuzzTime; a crash fails its check
// (the input lands in the package's testdata/fuzz for a regression test).
func fuzzPhase(t *testing.T, sc scale, r *report) {
	for _, ft := range fuzzTargets {
		ctx, cancel := context.WithTimeout(context.Background(), sc.FuzzTime+3*time.Minute) // + build
		cmd := exec.CommandContext(ctx, "go", "test", "-run", "^$", "-fuzz", "^"+ft.name+"$",
			"-fuzztime", sc.FuzzTime.String(), "-parallel", "2", ft.pkg)
		cmd.Dir = ".."
		cmd.Env = os.Environ()
		start := time.Now()
		out, err := cmd.CombinedOutput()
		cancel()
		execs := "?"
		if m := execsRE.FindAllStringSubmatch(string(out), -1); len(m) > 0 {
			execs = m[len(m)-1][1]
		}
		figure := fmt.Sprintf("%s execs in %s", execs, sc.FuzzTime)
		if err != nil {
			t.Logf("%s %s:\n%s", ft.pkg, ft.name, out)
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			figure += ": " + strings.Join(lines[max(0, len(lines)-4):], " / ")
		}
		r.add("fuzz", ft.name, err == nil, "no crash", "%s", figure)
		_ = start
	}
}
