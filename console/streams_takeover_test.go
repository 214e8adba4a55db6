package console_test

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/console"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// TestStreams_NewSerialConsoleWaitsForTheOld: the holder's serial console
// is open on a when a second one opens on c (another tab). c dials the
// line only once a's has let it go, never while a's holds it (on
// KubeVirt a second client kicks the first): while a's stays open, c's is
// refused after the wait, having dialed nothing; once a's ends (as its
// takeover ends it), c's dials and is recorded.
func TestStreams_NewSerialConsoleWaitsForTheOld(t *testing.T) {
	defer console.SetHandOverWait(time.Second)()
	table := &ownerTable{recs: map[string]console.Owner{}, dead: map[string]bool{}}
	a, c := startReplica(t, table, "a", nil), startReplica(t, table, "c", nil)
	ref := vdi.Ref{Namespace: "ns", Name: "vm-8"}
	ctx := context.Background()
	desk, up := net.Pipe()
	defer desk.Close()
	upA := &flaggedConn{Conn: up}
	holder, _, err := a.shared.Open(ctx, ref, vdi.ProtocolSerial, dialed(upA, "apiserver"), true)
	if err != nil {
		t.Fatal(err)
	}

	_, _, err = c.shared.Open(ctx, ref, vdi.ProtocolSerial, func(context.Context) (net.Conn, string, error) {
		t.Error("c dialed the serial line while a's console held it; want it refused, dialing nothing")
		return nil, "", errors.New("not dialed")
	}, true)
	if vdi.ErrorCode(err) != vdi.EConflict {
		t.Errorf("c's serial console while a's stays open: %v; want refused (conflict), saying to close the other", err)
	}

	deskC, upC := net.Pipe()
	defer deskC.Close()
	opened := make(chan error, 1)
	go func() {
		again, _, err := c.shared.Open(ctx, ref, vdi.ProtocolSerial, func(context.Context) (net.Conn, string, error) {
			if !upA.closed.Load() {
				t.Error("c dialed the serial line before a's console let it go")
			}
			return upC, "apiserver", nil
		}, true)
		if err == nil {
			t.Cleanup(func() { again.Close() })
		}
		opened <- err
	}()
	holder.Close() // taken over: a's console ends, and its line with it
	if err := <-opened; err != nil {
		t.Fatalf("c's serial console once a's ended: %v; want it open", err)
	}
	table.mu.Lock()
	got := table.recs[console.StreamKey(ref, vdi.ProtocolSerial)].Replica
	table.mu.Unlock()
	if got != "c" {
		t.Errorf("the serial console's record names %q; want c", got)
	}
}

// flaggedConn says whether it was closed, as soon as it is.
type flaggedConn struct {
	net.Conn
	closed atomic.Bool
}

func (c *flaggedConn) Close() error {
	c.closed.Store(true)
	return c.Conn.Close()
}
