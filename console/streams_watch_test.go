package console_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/console"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// TestStreams_SecondAdminWatches: an admin's own serial console of a
// desktop nobody holds holds the line (on a); a second admin's, on b or
// on a, joins it view only, dialing nothing, rather than waiting for the
// line to be let go; and one that opens while the first still dials
// joins it once it is open, never dialing a second client.
func TestStreams_SecondAdminWatches(t *testing.T) {
	defer console.SetHandOverWait(2 * time.Second)()
	table := &ownerTable{recs: map[string]console.Owner{}, dead: map[string]bool{}}
	a, b := startReplica(t, table, "a", nil), startReplica(t, table, "b", nil)
	ctx := context.Background()
	noDial := func(context.Context) (net.Conn, string, error) {
		t.Error("a second admin's serial console dialed the line while another admin's held it")
		return nil, "", errors.New("not dialed")
	}
	for _, slow := range []bool{false, true} {
		ref := vdi.Ref{Namespace: "ns", Name: "vm-admins"}
		if slow {
			ref.Name += "-slow"
		}
		desk, up := net.Pipe()
		defer desk.Close()
		gate := make(chan struct{})
		dial := func(context.Context) (net.Conn, string, error) {
			<-gate
			return up, "apiserver", nil
		}
		if !slow {
			close(gate)
		}
		type opened struct {
			c        net.Conn
			watching bool
			err      error
		}
		first := make(chan opened, 1)
		go func() {
			c, _, w, err := a.shared.OpenOrWatch(ctx, ref, vdi.ProtocolSerial, dial)
			first <- opened{c, w, err}
		}()
		if slow { // the second comes while the first dials
			for !strings.Contains(recordOf(table, ref), "a") {
				time.Sleep(10 * time.Millisecond)
			}
			go func() {
				time.Sleep(300 * time.Millisecond)
				close(gate)
			}()
		} else if o := <-first; o.err != nil || o.watching {
			t.Fatalf("the first admin's serial console: watching %v, %v; want its own", o.watching, o.err)
		} else {
			first <- o
		}
		second, path, watching, err := b.shared.OpenOrWatch(ctx, ref, vdi.ProtocolSerial, noDial)
		if err != nil || !watching || path != console.PathPeer {
			t.Fatalf("slow %v: the second admin's serial console on b: watching %v by %q, %v; want the first's, view only, by %q", slow, watching, path, err, console.PathPeer)
		}
		defer second.Close()
		o := <-first
		if o.err != nil || o.watching {
			t.Fatalf("slow %v: the first admin's serial console: watching %v, %v; want its own", slow, o.watching, o.err)
		}
		defer o.c.Close()
		third, _, watching, err := a.shared.OpenOrWatch(ctx, ref, vdi.ProtocolSerial, noDial)
		if err != nil || !watching {
			t.Fatalf("slow %v: a third admin's serial console on a: watching %v, %v; want the first's, view only", slow, watching, err)
		}
		defer third.Close()
		go desk.Write([]byte("login: "))
		for who, c := range map[string]net.Conn{"second": second, "third": third} {
			if got := readFor(t, c, "login: "); !strings.Contains(got, "login: ") {
				t.Errorf("slow %v: the %s admin read %q; want the line's %q", slow, who, got, "login: ")
			}
		}
		second.Write([]byte("second-keys\r"))
		third.Write([]byte("third-keys\r"))
		o.c.Write([]byte("first-keys\r"))
		if got := readFor(t, desk, "first-keys"); strings.Contains(got, "second-keys") || strings.Contains(got, "third-keys") {
			t.Errorf("slow %v: the line read %q; want the first admin's keys only", slow, got)
		}
	}
}

// recordOf is the replica the serial record of ref names, or "".
func recordOf(table *ownerTable, ref vdi.Ref) string {
	table.mu.Lock()
	defer table.mu.Unlock()
	return table.recs[console.StreamKey(ref, vdi.ProtocolSerial)].Replica
}

// TestStreams_SharedAsksTheReplica: a terminal's record naming a live
// replica that shares it says it is shared; one left behind (its delete
// refused) by a replica that no longer shares it does not, as a join
// would not find it: a page's preflight and its websocket agree.
func TestStreams_SharedAsksTheReplica(t *testing.T) {
	table := &ownerTable{recs: map[string]console.Owner{}, dead: map[string]bool{}}
	a, b := startReplica(t, table, "a", nil), startReplica(t, table, "b", nil)
	ref := vdi.Ref{Namespace: "ns", Name: "ct-1"}
	ctx := context.Background()
	desk, up := net.Pipe()
	defer desk.Close()
	holder, _, err := a.shared.Open(ctx, ref, vdi.ProtocolTerminal, dialed(up, "exec"), false)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := b.shared.Shared(ctx, ref, vdi.ProtocolTerminal); !ok || err != nil {
		t.Errorf("b asked whether the terminal open on a is shared: %v, %v; want yes", ok, err)
	}
	key := console.StreamKey(ref, vdi.ProtocolTerminal)
	table.mu.Lock()
	rec := table.recs[key]
	table.mu.Unlock()
	holder.Close()
	for recordOfKey(table, key) != "" {
		time.Sleep(10 * time.Millisecond)
	}
	table.mu.Lock()
	table.recs[key] = rec // its delete refused: the record stays, naming a
	table.mu.Unlock()
	if ok, err := b.shared.Shared(ctx, ref, vdi.ProtocolTerminal); ok || err != nil {
		t.Errorf("b asked whether the terminal closed on a, its record left behind, is shared: %v, %v; want no, as a join finds none", ok, err)
	}
	if _, _, ok, _ := b.shared.Join(ctx, ref, vdi.ProtocolTerminal, false); ok {
		t.Error("a join on b found the closed terminal")
	}
}

// recordOfKey is the replica the record key names, or "".
func recordOfKey(table *ownerTable, key string) string {
	table.mu.Lock()
	defer table.mu.Unlock()
	return table.recs[key].Replica
}
