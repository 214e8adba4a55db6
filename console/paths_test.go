package console

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

func TestFinal(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{vdi.Errorf(vdi.ENotFound, "", "no such desktop"), true},
		{vdi.Errorf(vdi.EUnavailable, "", "not running"), true},
		{&vdi.Error{Code: vdi.EUnavailable, Err: errors.New("connection refused")}, false},
		{context.DeadlineExceeded, false},
	}
	for _, tt := range tests {
		if got := final(tt.err); got != tt.want {
			t.Errorf("final(%v) = %v; want %v", tt.err, got, tt.want)
		}
	}
}

// dialer is a Direct or Path that fails with err, or hands out one end of
// a pipe; it counts its dials.
type dialer struct {
	name  string
	err   error
	dials int
}

func (d *dialer) Name() string { return d.name }

func (d *dialer) Dial(context.Context, vdi.Ref, vdi.Protocol) (net.Conn, error) {
	d.dials++
	if d.err != nil {
		return nil, d.err
	}
	a, b := net.Pipe()
	b.Close()
	return a, nil
}

// TestConsoleDial checks the path order: direct first, then the further
// paths; an error no path can mend ends the search; someone alongside the
// holder never opens a VNC or serial console through the API server
// (KubeVirt would disconnect the holder); and when every path fails the
// error names each.
func TestConsoleDial(t *testing.T) {
	ref := vdi.Ref{Namespace: "ns", Name: "vm-1"}
	unreachable := errors.New("dial tcp 10.0.0.7:5900: i/o timeout")
	tests := []struct {
		name      string
		direct    error
		path      error
		p         vdi.Protocol
		alongside bool
		wantPath  string
		wantDials int    // of the further path
		wantErr   string // in the message, "" for none
	}{
		{"Direct", nil, nil, vdi.ProtocolVNC, false, PathDirect, 0, ""},
		{"Fallback", unreachable, nil, vdi.ProtocolVNC, false, PathAPIServer, 1, ""},
		{"NotRunningIsFinal", vdi.Errorf(vdi.EUnavailable, "", "not running"), nil, vdi.ProtocolVNC, false, "", 0, "not running"},
		{"AlongsideVNCNotThroughAPIServer", unreachable, nil, vdi.ProtocolVNC, true, "", 0, "one viewer at a time"},
		{"AlongsideRDPThroughAPIServer", unreachable, nil, vdi.ProtocolRDP, true, PathAPIServer, 1, ""},
		{"EveryPathFails", unreachable, errors.New("503 Service Unavailable"), vdi.ProtocolSerial, false, "", 1, "direct: dial tcp 10.0.0.7:5900: i/o timeout; apiserver: 503"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := &dialer{name: PathAPIServer, err: tt.path}
			c := New(Config{Direct: &dialer{err: tt.direct}, Peers: []string{"http://peer.invalid"}, Paths: []Path{path}})
			dial := c.Dial
			if tt.alongside {
				dial = c.DialAlongside
			}
			conn, got, err := dial(context.Background(), ref, tt.p)
			if conn != nil {
				conn.Close()
			}
			if got != tt.wantPath || path.dials != tt.wantDials {
				t.Errorf("path %q after %d dials of the API server; want %q after %d (no peer without a secret)", got, path.dials, tt.wantPath, tt.wantDials)
			}
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("err = %v; want %q", err, tt.wantErr)
			}
		})
	}
}

// silentDirect is a Direct whose desktop never answers: its dial ends
// only with its context, whose deadline it records.
type silentDirect struct {
	deadline time.Time
	bounded  bool
}

func (d *silentDirect) Dial(ctx context.Context, _ vdi.Ref, _ vdi.Protocol) (net.Conn, error) {
	d.deadline, d.bounded = ctx.Deadline()
	if !d.bounded { // it would hang: the test fails below
		return nil, errors.New("a silent desktop, dialed without a deadline")
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestConsoleDial_DirectBudget: a silent direct path costs the connect
// budget (DirectTimeout), then the console falls back; the budget is
// checked by the deadline the direct dial was given, not by a clock.
func TestConsoleDial_DirectBudget(t *testing.T) {
	for _, budget := range []time.Duration{0, 50 * time.Millisecond} {
		want := budget
		if want == 0 {
			want = defaultDirectTimeout
		}
		direct, path := &silentDirect{}, &dialer{name: PathAPIServer}
		c := New(Config{Direct: direct, Paths: []Path{path}, DirectTimeout: budget})
		before := time.Now()
		conn, got, err := c.Dial(context.Background(), vdi.Ref{Namespace: "ns", Name: "vm-1"}, vdi.ProtocolVNC)
		after := time.Now()
		if err != nil || got != PathAPIServer {
			t.Fatalf("Dial with a silent direct path (budget %v): %q, %v; want the API server's path", budget, got, err)
		}
		conn.Close()
		if !direct.bounded || direct.deadline.Before(before.Add(want)) || direct.deadline.After(after.Add(want)) {
			t.Errorf("the direct dial's deadline (budget %v): %v (set %v); want the dial's start plus %v, between %v and %v",
				budget, direct.deadline, direct.bounded, want, before.Add(want), after.Add(want))
		}
	}
}
