package relay

import (
	"io"
	"net"
	"os"
	"sync"
	"syscall"
)

// An idle console holds no copy buffer: each direction takes one from a
// pool only while bytes are moving. The client side blocks in gorilla's
// small read buffer and takes a buffer once a message starts; the desktop
// side, on a plain TCP or Unix socket, waits for readability with no
// buffer at all (readRaw), and on a pipe in a small one (burstReader).

// buffers lends copy buffers by size; sizes other than the default get
// their own pool the first time they are asked for.
var buffers sync.Map // int -> *sync.Pool of *[]byte

// getBuffer returns a buffer of size bytes; give it back with putBuffer.
func getBuffer(size int) *[]byte {
	p, ok := buffers.Load(size)
	if !ok {
		p, _ = buffers.LoadOrStore(size, &sync.Pool{New: func() any {
			b := make([]byte, size)
			return &b
		}})
	}
	return p.(*sync.Pool).Get().(*[]byte)
}

// putBuffer gives b back for another relay to use.
func putBuffer(b *[]byte) {
	if p, ok := buffers.Load(len(*b)); ok {
		p.(*sync.Pool).Put(b)
	}
}

// rawReader reads a socket without holding a buffer while it waits.
type rawReader struct {
	rc    syscall.RawConn
	size  int
	buf   *[]byte // lent while data is flowing, nil while waiting
	n     int     // what the last read syscall returned
	err   error
	tryFn func(fd uintptr) bool // try, made once: a method value allocates
}

// newRawReader returns a rawReader for conn when it is a plain TCP or
// Unix socket, else nil: a wrapped conn (TLS, a filter, a websocket
// adapter) may buffer bytes of its own, so it is read the usual way.
func newRawReader(conn net.Conn, size int) *rawReader {
	var sc syscall.Conn
	switch c := conn.(type) {
	case *net.TCPConn:
		sc = c
	case *net.UnixConn:
		sc = c
	default:
		return nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	r := &rawReader{rc: rc, size: size}
	r.tryFn = r.try
	return r
}

// read waits until the socket has bytes (or an end) and reads them into a
// lent buffer, which it returns. The buffer stays lent until a later read
// finds the socket empty or release is called. At the end of the stream it
// returns io.EOF.
func (r *rawReader) read() ([]byte, error) {
	if err := r.rc.Read(r.tryFn); err != nil { // closed, or a deadline passed
		return nil, err
	}
	switch {
	case r.err != nil:
		return nil, os.NewSyscallError("read", r.err)
	case r.n <= 0:
		return nil, io.EOF
	}
	return (*r.buf)[:r.n], nil
}

// try reads fd once into the lent buffer and reports whether it is done;
// on an empty socket it gives the buffer back and asks to wait.
func (r *rawReader) try(fd uintptr) bool {
	if r.buf == nil {
		r.buf = getBuffer(r.size)
	}
	for {
		r.n, r.err = syscall.Read(int(fd), *r.buf)
		if r.err != syscall.EINTR {
			break
		}
	}
	if r.err == syscall.EAGAIN {
		putBuffer(r.buf)
		r.buf = nil
		return false
	}
	return true
}

// release gives back the lent buffer, if any.
func (r *rawReader) release() {
	if r.buf != nil {
		putBuffer(r.buf)
		r.buf = nil
	}
}

// quietBufferSize is what a burstReader holds while its conn is quiet.
const quietBufferSize = 4 << 10

// burstReader reads a conn that cannot be polled for readability (a pipe
// from the screen hub or a shared terminal) into a small buffer of its own
// while it is quiet, and into a lent buffer of full size while a read
// fills the small one (more is likely waiting), until a read comes back
// short: an idle console of that kind holds 4 KiB, not the relay's 64.
type burstReader struct {
	conn  net.Conn
	size  int
	small []byte
	big   *[]byte // lent while reads fill their buffer
	busy  bool    // the last read filled its buffer
}

func newBurstReader(conn net.Conn, size int) *burstReader {
	return &burstReader{conn: conn, size: size, small: make([]byte, min(quietBufferSize, size))}
}

// read returns what one Read of the conn gave, valid until the next read.
func (b *burstReader) read() ([]byte, error) {
	if b.big != nil && !b.busy { // the bytes read into it have been used
		putBuffer(b.big)
		b.big = nil
	}
	buf := b.small
	if b.big != nil {
		buf = *b.big
	}
	n, err := b.conn.Read(buf)
	b.busy = n == len(buf)
	if b.busy && b.big == nil {
		b.big = getBuffer(b.size)
	}
	return buf[:n], err
}

// release gives back the lent buffer, if any.
func (b *burstReader) release() {
	if b.big != nil {
		putBuffer(b.big)
		b.big = nil
	}
}
