package testnet

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/corral-dev/corral-vdi-portal/internal/testoutcome"
)

// A set-up that cannot run skips its test only where the machine truly
// lacks what it needs, saying which; any other failure of ip fails the
// test with what ip said, so an attack row never passes by not running.
// A fake ip on PATH says each thing the kernel and iproute2 say (see
// absent) at the step each helper needs first; it answers every other
// call with success.
func TestSetUp_SkipsOnlyWhatIsAbsent(t *testing.T) {
	helpers := []struct {
		name string
		step string // the ip verb the fake refuses
		run  func(t testing.TB)
	}{
		{"New", "link add", func(t testing.TB) { New(t) }},
		{"Reserve", "netns add", func(t testing.TB) { Reserve(t, "cvfake") }},
		{"AddHostAddr", "route add", func(t testing.TB) { AddHostAddr(t, "198.18.9.10") }},
	}
	cases := []struct {
		name  string
		euid  int
		said  string // by the fake ip; "" for no ip on PATH
		skip  bool
		about string // what the skip or failure must say
	}{
		{"NotRoot", 1000, "RTNETLINK answers: Operation not permitted", true, "needs root"},
		{"NoIPCommand", 0, "", true, "iproute2"},
		{"RootRefused", 0, "RTNETLINK answers: Operation not permitted", true, "EPERM"},
		{"RootRefusedMount", 0, "mount --make-shared /run/netns failed: Operation not permitted", true, "EPERM"},
		{"NoNetworkNamespaces", 0, `Failed to create a new network namespace "cvfake1": Invalid argument`, true, "CONFIG_NET_NS"},
		{"NoVeth", 0, "Error: Unknown device type.", true, "EOPNOTSUPP"},
		{"RouteTaken", 0, "RTNETLINK answers: File exists", false, "File exists"},
		{"NoSuchNamespace", 0, `Cannot open network namespace "cvdn1": No such file or directory`, false, "No such file"},
		{"BadArgument", 0, `Error: argument "x" is wrong: Invalid "netns" value`, false, "is wrong"},
	}
	for _, h := range helpers {
		for _, tc := range cases {
			t.Run(h.name+"/"+tc.name, func(t *testing.T) {
				bin := t.TempDir()
				if tc.said != "" {
					script := fmt.Sprintf("#!/bin/sh\ncase \"$*\" in *%q*) echo %q >&2; exit 2;; esac\nexit 0\n", h.step, tc.said)
					if err := os.WriteFile(filepath.Join(bin, "ip"), []byte(script), 0o755); err != nil {
						t.Fatal(err)
					}
				}
				t.Setenv("PATH", bin)
				saved := geteuid
				geteuid = func() int { return tc.euid }
				defer func() { geteuid = saved }()
				got := testoutcome.Run(t, h.run)
				got.Want(t, tc.skip, tc.about, fmt.Sprintf("%s with ip saying %q", h.name, tc.said))
			})
		}
	}
}
