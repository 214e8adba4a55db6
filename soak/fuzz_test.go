package soak

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// files returns the names in dir.
func files(dir string) []string {
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

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
		corpus := filepath.Join("..", ft.pkg, "testdata", "fuzz", ft.name)
		before := files(corpus)
		out, err := cmd.CombinedOutput()
		cancel()
		// Go 1.26's fuzz coordinator can fail a run at the -fuzztime
		// boundary with a bare "context deadline exceeded" on a loaded
		// machine (go.dev/issue/75804): no input failed and no reproducer
		// is written. Only a written reproducer is a crash.
		race := false
		if err != nil && len(files(corpus)) == len(before) && strings.Contains(string(out), "context deadline exceeded") &&
			!strings.Contains(string(out), "Failing input written") {
			race, err = true, nil
		}
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
		if race {
			figure += " (stopped by go.dev/issue/75804, no reproducer)"
		}
		r.add("fuzz", ft.name, err == nil, "no crash", "%s", figure)
	}
}
