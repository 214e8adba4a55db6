package relay

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// usbredir (the USB network redirection protocol of QEMU, SPICE and
// KubeVirt): every packet starts with a little-endian header {type uint32,
// length uint32, id uint32} (id becomes 64-bit only after both hellos
// announce usb_redir_cap_64bits_ids), followed by length bytes. The first
// packet each side sends is usb_redir_hello (type 0): a NUL-padded version
// string of 64 bytes, then the sender's capability bitmap as uint32s. The
// relay never needs more than the hellos: it only reads them to say who
// is on the other end.

// USBRedirHelloType is the packet type of usb_redir_hello.
const USBRedirHelloType = 0

// usbRedirHeaderLen is the header's size before 64-bit ids are agreed.
const usbRedirHeaderLen = 12

// usbRedirVersionLen is the size of the hello's version string.
const usbRedirVersionLen = 64

// maxUSBRedirCaps bounds the capability words a hello may carry.
const maxUSBRedirCaps = 64

// USBRedirHello is a usb_redir_hello packet with version and caps.
func USBRedirHello(version string, caps ...uint32) []byte {
	b := make([]byte, usbRedirHeaderLen+usbRedirVersionLen+4*len(caps))
	binary.LittleEndian.PutUint32(b[0:], USBRedirHelloType)
	binary.LittleEndian.PutUint32(b[4:], uint32(usbRedirVersionLen+4*len(caps)))
	binary.LittleEndian.PutUint32(b[8:], 0)
	copy(b[usbRedirHeaderLen:usbRedirHeaderLen+usbRedirVersionLen-1], version)
	for i, c := range caps {
		binary.LittleEndian.PutUint32(b[usbRedirHeaderLen+usbRedirVersionLen+4*i:], c)
	}
	return b
}

// ReadUSBRedirHello reads the first packet of a usbredir stream from r,
// which must be a usb_redir_hello, and returns its version and caps.
func ReadUSBRedirHello(r io.Reader) (version string, caps []uint32, err error) {
	var h [usbRedirHeaderLen]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return "", nil, fmt.Errorf("usbredir: reading the hello: %w", err)
	}
	typ, n := binary.LittleEndian.Uint32(h[0:]), binary.LittleEndian.Uint32(h[4:])
	if typ != USBRedirHelloType {
		return "", nil, fmt.Errorf("usbredir: first packet has type %d, not usb_redir_hello", typ)
	}
	if n < usbRedirVersionLen || n > usbRedirVersionLen+4*maxUSBRedirCaps || (n-usbRedirVersionLen)%4 != 0 {
		return "", nil, fmt.Errorf("usbredir: hello of %d bytes", n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return "", nil, fmt.Errorf("usbredir: reading the hello: %w", err)
	}
	v := body[:usbRedirVersionLen]
	if i := bytes.IndexByte(v, 0); i >= 0 {
		v = v[:i]
	} else {
		return "", nil, errors.New("usbredir: hello version is not NUL-terminated")
	}
	for i := usbRedirVersionLen; i < len(body); i += 4 {
		caps = append(caps, binary.LittleEndian.Uint32(body[i:]))
	}
	return string(v), caps, nil
}
