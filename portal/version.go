package portal

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// version and commit are set at link time by scripts/build-binary.sh
// (-ldflags -X); a plain `go build` leaves them empty and Version falls
// back on the module and VCS facts Go stamps into every binary.
var (
	version string
	commit  string
)

// BuildInfo says which build of the portal this is.
type BuildInfo struct {
	// Version is the release (v0.3.0), or "devel" for an unreleased build.
	Version string
	// Commit is the git revision the binary was built from, with
	// "-dirty" when the tree had uncommitted changes; "unknown" when
	// neither the linker nor Go's VCS stamp said.
	Commit string
	// Go is the toolchain that built it.
	Go string
}

// Version returns this binary's BuildInfo.
func Version() BuildInfo {
	b := BuildInfo{Version: version, Commit: commit, Go: runtime.Version()}
	if info, ok := debug.ReadBuildInfo(); ok {
		if b.Version == "" && info.Main.Version != "" && info.Main.Version != "(devel)" {
			b.Version = info.Main.Version
		}
		var rev, modified string
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				modified = s.Value
			}
		}
		if b.Commit == "" && rev != "" {
			b.Commit = rev
			if modified == "true" {
				b.Commit += "-dirty"
			}
		}
	}
	if b.Version == "" {
		b.Version = "devel"
	}
	if b.Commit == "" {
		b.Commit = "unknown"
	}
	return b
}

// PrintVersion writes the version subcommand's output: one line an
// operator can paste into a bug report.
func PrintVersion(w io.Writer) {
	v := Version()
	fmt.Fprintf(w, "corral-vdi-portal %s (commit %s, %s)\n", v.Version, v.Commit, v.Go)
}
