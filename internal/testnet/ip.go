package testnet

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// geteuid is os.Geteuid; a test of the skip-or-fail decision replaces it.
var geteuid = os.Geteuid

// mustRoot skips the test where it does not run as root, which every
// set-up here needs (network namespaces, veth pairs, local routes).
func mustRoot(t testing.TB) {
	t.Helper()
	if geteuid() != 0 {
		t.Skip("the test's network set-up needs root")
	}
}

// ip runs the ip command (iproute2) for a test's set-up. Where the machine truly lacks what it asks (absent says which)
// it skips the test; any other failure fails it with what ip said, so a
// test that needs the set-up (an attack row) never passes by not running.
func ip(t testing.TB, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		ipFailed(t, args, out, err)
	}
}

// ipFailed skips or fails the test for a failure of "ip args" (see ip).
func ipFailed(t testing.TB, args []string, out []byte, err error) {
	t.Helper()
	if why := absent(out, err); why != "" {
		t.Skipf("ip %s: %s", strings.Join(args, " "), why)
	}
	t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
}

// absent returns why a failure of ip (its output and error), run as root,
// means this machine cannot make a test's network, or "" where it can and
// something went wrong. What the kernel and iproute2 say for each:
//   - no ip command: exec's "executable file not found";
//   - root without CAP_SYS_ADMIN or CAP_NET_ADMIN (a container), or under
//     a seccomp or security-module refusal: EPERM, "mount --make-shared
//     /run/netns failed: Operation not permitted" (netns add) or
//     "RTNETLINK answers: Operation not permitted";
//   - a kernel without network namespaces (no CONFIG_NET_NS): unshare
//     says EINVAL, "Failed to create a new network namespace ...: Invalid
//     argument";
//   - a kernel without veth: EOPNOTSUPP, "Error: Unknown device type."
//     (the kernel's own words), or "Operation not supported".
//
// Everything else ("File exists", "No such file or directory", a bad
// argument) is a fault of the test or of the machine's state, not a
// missing capability.
func absent(out []byte, err error) string {
	said := strings.TrimSpace(string(out))
	switch {
	case errors.Is(err, exec.ErrNotFound):
		return "no ip command: install the Debian package iproute2"
	case strings.Contains(said, "Operation not permitted"):
		return "the kernel refuses root here (EPERM: a container without CAP_NET_ADMIN and CAP_SYS_ADMIN, or a seccomp or security-module rule): " + said
	case strings.Contains(said, "Failed to create a new network namespace") && strings.Contains(said, "Invalid argument"):
		return "the kernel has no network namespaces (CONFIG_NET_NS): " + said
	case strings.Contains(said, "Unknown device type") || strings.Contains(said, "Operation not supported"):
		return "the kernel does not support it (EOPNOTSUPP: no veth module?): " + said
	}
	return ""
}
