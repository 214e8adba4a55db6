package local

import (
	"context"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestWaitSocket_WaitsForListen forces the moment between a server's
// bind (the socket file is there) and its listen (connections are still
// refused): waitSocket returns only once the server listens.
func TestWaitSocket_WaitsForListen(t *testing.T) {
	path, fd := boundSocket(t)
	done := make(chan error, 1)
	go func() { done <- waitSocket(context.Background(), path) }()
	select {
	case err := <-done:
		t.Fatalf("waitSocket returned (%v) while the socket was bound but not listening", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := syscall.Listen(fd, 1); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("waitSocket after listen: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waitSocket did not return once the socket listened")
	}
}

// TestWaitSocket_NothingListens: a socket nobody listens on ends the wait
// with an error that says so.
func TestWaitSocket_NothingListens(t *testing.T) {
	path, _ := boundSocket(t)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	if err := waitSocket(ctx, path); err == nil || !strings.Contains(err.Error(), "nothing listens") {
		t.Errorf("waitSocket on a socket nobody listens on = %v; want \"nothing listens on …\"", err)
	}
}

// boundSocket is a Unix socket bound to a new path and not listening, as
// a server has it between its bind and its listen.
func boundSocket(t *testing.T) (path string, fd int) {
	t.Helper()
	path = filepath.Join(t.TempDir(), "rdp.sock")
	fd, err := syscall.Socket(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrUnix{Name: path}); err != nil {
		t.Fatal(err)
	}
	return path, fd
}
