package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/api"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// update rewrites the golden files in testdata/.
var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// mustMatchGolden compares got with testdata/name, or rewrites it with -update.
func mustMatchGolden(tb testing.TB, name, got string) {
	tb.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			tb.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			tb.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		tb.Fatalf("%v (run with -update to write it)", err)
	}
	if got != string(want) {
		tb.Fatalf("%s differs (run with -update to accept):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// TestCLIGolden_Help checks every walkthrough command's -h against its
// golden file: the usage line, the flags and the examples.
func TestCLIGolden_Help(t *testing.T) {
	for _, args := range [][]string{
		{"pool", "create"}, {"pool", "list"}, {"assign"}, {"unassign"}, {"connect"},
		{"usb", "list"}, {"usb", "redir"},
	} {
		name := strings.Join(args, "-")
		t.Run(name, func(t *testing.T) {
			var out, usage bytes.Buffer
			e := Env{Getenv: func(string) string { return "" }, Out: &out, ErrOut: &usage}
			err := commands[args[0]](context.Background(), e, append(args[1:], "-h"))
			if !errors.Is(err, flag.ErrHelp) {
				t.Fatalf("%s -h = %v; want flag.ErrHelp", name, err)
			}
			if !strings.Contains(usage.String(), "examples:") {
				t.Errorf("%s -h has no examples:\n%s", name, usage.String())
			}
			mustMatchGolden(t, "help-"+name+".golden", usage.String())
		})
	}
}

// TestCLIGolden_PoolListTable checks pool list's table for free, held,
// resetting and failed desktops, and that control characters in a reason stay out.
func TestCLIGolden_PoolListTable(t *testing.T) {
	t.Setenv("TZ", "UTC")
	at := time.Date(2026, 12, 1, 9, 30, 0, 0, time.UTC)
	ds := []vdi.Desktop{
		{Member: vdi.Member{Namespace: "local", Name: "demo-1", Pool: "demo", Power: vdi.PowerRunning}, Holder: "alice", ClaimedAt: at},
		{Member: vdi.Member{Namespace: "local", Name: "demo-2", Pool: "demo", Power: vdi.PowerStopped}},
		{Member: vdi.Member{Namespace: "local", Name: "demo-3", Pool: "demo", Power: vdi.PowerStopping}, Resetting: "release"},
		{Member: vdi.Member{Namespace: "vdi", Name: "win-1", Pool: "win", Power: vdi.PowerFailed, Reason: "no disk\x1b[31m"}},
	}
	var out bytes.Buffer
	f := NewFlags(Env{Out: &out, ErrOut: &out}, "pool list", "")
	if err := poolListTable(f, ds); err != nil {
		t.Fatal(err)
	}
	mustMatchGolden(t, "pool-list.golden", strings.ReplaceAll(out.String(), at.Local().Format("2006-01-02 15:04:05"), "<claimed>"))
}

// TestCLIGolden_ConnectTable checks connect's table of consoles and paths.
func TestCLIGolden_ConnectTable(t *testing.T) {
	var out bytes.Buffer
	rows := [][]string{
		connectRow("best", api.ConnectOption{Protocol: "rdp", WebSocket: "/ws/rdp/vdi/win-1", Path: "direct"}, "https://vdi.example"),
		connectRow("fallback 1", api.ConnectOption{Protocol: "vnc", WebSocket: "/ws/vnc/vdi/win-1", Path: "apiserver"}, "https://vdi.example"),
		connectRow("fallback 2", api.ConnectOption{Protocol: "serial", WebSocket: "/ws/serial/vdi/win-1", PathError: "connection refused"}, "https://vdi.example"),
	}
	if err := table(&out, []string{"CHOICE", "PROTOCOL", "PATH", "WEBSOCKET"}, rows); err != nil {
		t.Fatal(err)
	}
	mustMatchGolden(t, "connect.golden", out.String())
}

// TestCLI_ExitCodes checks the exit code of each kind of failure.
func TestCLI_ExitCodes(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{nil, ExitOK},
		{usagef("x"), ExitUsage},
		{&api.Error{Status: 404}, ExitNotFound},
		{&api.Error{Status: 409}, ExitConflict},
		{conflictf("ambiguous"), ExitConflict},
		{&exitError{ExitNoPortal, errors.New("x")}, ExitNoPortal},
		{&api.Error{Status: 403}, ExitRefused},
		{&api.Error{Status: 500}, ExitFailed},
		{errors.New("x"), ExitFailed},
	} {
		if got := ExitCode(tc.err); got != tc.want {
			t.Errorf("ExitCode(%v) = %d; want %d", tc.err, got, tc.want)
		}
	}
}

// TestCLIGolden_Usage checks the admin subcommands' overview that `help`
// prints, and that it names every subcommand.
func TestCLIGolden_Usage(t *testing.T) {
	for name := range commands {
		if !strings.Contains(Usage, "\n  "+name+" ") && !strings.Contains(Usage, "\n  "+name+"\n") {
			t.Errorf("Usage does not list %s", name)
		}
	}
	mustMatchGolden(t, "usage.golden", Usage+"\n")
}
