//go:build !linux

package portal

import (
	"errors"
	"net"
)

// peerUID is only implemented on Linux; elsewhere the admin socket refuses
// every caller.
func peerUID(*net.UnixConn) (int, error) {
	return 0, errors.New("peer credentials are only read on Linux; set CORRAL_VDI_ADMIN_SOCKET=off")
}
