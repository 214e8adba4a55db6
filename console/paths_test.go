package console

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

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
