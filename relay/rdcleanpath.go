package relay

import (
	"encoding/asn1"
	"errors"
	"fmt"
	"strings"
)

// RDCleanPath is the protocol IronRDP's browser client speaks to a websocket
// gateway: one DER-encoded PDU each way (the request carries the client's
// X.224 Connection Request, the response the server's Confirm and its TLS
// certificates), then the RDP stream after TLS as plain websocket bytes. The
// gateway, not the browser, does the TLS handshake with the RDP server.

// RDCleanPathVersion is the only protocol version IronRDP speaks (3389 + 1);
// a reply carrying 3389 fails in the client as an invalid PDU.
const RDCleanPathVersion = 3390

// RDCleanPath error codes.
const (
	// RDCleanPathGeneralError is any gateway failure; the HTTP status, WSA
	// error or TLS alert fields say more.
	RDCleanPathGeneralError = 1
	// RDCleanPathNegotiationError reports an RDP negotiation failure; the
	// PDU then carries the server's X.224 answer so the client can tell why.
	RDCleanPathNegotiationError = 2
)

// MaxRDCleanPathPDU caps the size of a request PDU. A real one holds a
// token, a host name, a small X.224 PDU and maybe a preconnection blob: a
// few hundred bytes.
const MaxRDCleanPathPDU = 64 << 10

// ErrRDCleanPathIncomplete is returned by RDCleanPathLength when more bytes
// are needed to know the PDU's length.
var ErrRDCleanPathIncomplete = errors.New("rdcleanpath: incomplete PDU header")

// RDCleanPathPDU is one RDCleanPath message. The zero value of an optional
// field means absent.
type RDCleanPathPDU struct {
	// Version is RDCleanPathVersion in every valid PDU.
	Version int64
	// Error, in a gateway's reply, says why it failed.
	Error *RDCleanPathError
	// Destination is the RDP server the client asked for. A gateway must
	// not connect to it: it names the target only for sanity checks.
	Destination string
	// ProxyAuth is the client's token for the gateway.
	ProxyAuth string
	// ServerAuth is unused by IronRDP.
	ServerAuth string
	// PreconnectionBlob is sent to the server before the X.224 request.
	PreconnectionBlob string
	// X224 is the client's Connection Request or the server's Confirm,
	// TPKT header included.
	X224 []byte
	// ServerCertChain is the server's TLS certificate chain, leaf first, in DER.
	ServerCertChain [][]byte
	// ServerAddr is the server address the gateway connected to, IP:port.
	ServerAddr string
}

// RDCleanPathError is the error part of an RDCleanPath reply. Zero fields
// other than Code are absent.
type RDCleanPathError struct {
	// Code is RDCleanPathGeneralError or RDCleanPathNegotiationError.
	Code int
	// HTTPStatus is an HTTP status that fits the failure (0..65535).
	HTTPStatus int
	// WSAError is a Windows socket error number, e.g. 10061 for "refused".
	WSAError int
	// TLSAlert is a TLS alert number (0..255).
	TLSAlert int
}

// Error implements error with the fields that are set.
func (e *RDCleanPathError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "rdcleanpath error code %d", e.Code)
	if e.HTTPStatus != 0 {
		fmt.Fprintf(&b, ", HTTP %d", e.HTTPStatus)
	}
	if e.WSAError != 0 {
		fmt.Fprintf(&b, ", WSA %d", e.WSAError)
	}
	if e.TLSAlert != 0 {
		fmt.Fprintf(&b, ", TLS alert %d", e.TLSAlert)
	}
	return b.String()
}

// The wire shapes: EXPLICIT context tags, UTF8String strings, and every
// field but the version optional. encoding/asn1 leaves out an optional
// field holding its zero value, which is how absent fields are written.
type pduWire struct {
	Version           int64         `asn1:"explicit,tag:0"`
	Error             errWire       `asn1:"optional,explicit,tag:1"`
	Destination       string        `asn1:"optional,explicit,tag:2,utf8"`
	ProxyAuth         string        `asn1:"optional,explicit,tag:3,utf8"`
	ServerAuth        string        `asn1:"optional,explicit,tag:4,utf8"`
	PreconnectionBlob string        `asn1:"optional,explicit,tag:5,utf8"`
	X224              []byte        `asn1:"optional,explicit,tag:6"`
	ServerCertChain   [][]byte      `asn1:"optional,explicit,tag:7"`
	OCSPResponse      asn1.RawValue `asn1:"optional,explicit,tag:8"` // reserved upstream; read and dropped
	ServerAddr        string        `asn1:"optional,explicit,tag:9,utf8"`
}

type errWire struct {
	Code       int64 `asn1:"explicit,tag:0"`
	HTTPStatus int64 `asn1:"optional,explicit,tag:1"`
	WSAError   int64 `asn1:"optional,explicit,tag:2"`
	TLSAlert   int64 `asn1:"optional,explicit,tag:3"`
}

// Marshal returns p in DER.
func (p *RDCleanPathPDU) Marshal() ([]byte, error) {
	w := pduWire{
		Version:           p.Version,
		Destination:       p.Destination,
		ProxyAuth:         p.ProxyAuth,
		ServerAuth:        p.ServerAuth,
		PreconnectionBlob: p.PreconnectionBlob,
		ServerAddr:        p.ServerAddr,
	}
	if len(p.X224) > 0 {
		w.X224 = p.X224
	}
	if len(p.ServerCertChain) > 0 {
		w.ServerCertChain = p.ServerCertChain
	}
	if e := p.Error; e != nil {
		if e.Code <= 0 {
			return nil, fmt.Errorf("rdcleanpath: marshal: error code %d", e.Code)
		}
		w.Error = errWire{Code: int64(e.Code), HTTPStatus: int64(e.HTTPStatus), WSAError: int64(e.WSAError), TLSAlert: int64(e.TLSAlert)}
	}
	b, err := asn1.Marshal(w)
	if err != nil {
		return nil, fmt.Errorf("rdcleanpath: marshal: %w", err)
	}
	return b, nil
}

// UnmarshalRDCleanPath decodes exactly one PDU from b: trailing bytes, a
// version other than RDCleanPathVersion, out-of-range error fields and PDUs
// larger than MaxRDCleanPathPDU are errors.
func UnmarshalRDCleanPath(b []byte) (*RDCleanPathPDU, error) {
	if len(b) > MaxRDCleanPathPDU {
		return nil, fmt.Errorf("rdcleanpath: PDU of %d bytes exceeds %d", len(b), MaxRDCleanPathPDU)
	}
	var w pduWire
	rest, err := asn1.Unmarshal(b, &w)
	if err != nil {
		return nil, fmt.Errorf("rdcleanpath: %w", err)
	}
	if len(rest) > 0 {
		return nil, fmt.Errorf("rdcleanpath: %d bytes after the PDU", len(rest))
	}
	if w.Version != RDCleanPathVersion {
		return nil, fmt.Errorf("rdcleanpath: version %d, want %d", w.Version, RDCleanPathVersion)
	}
	p := &RDCleanPathPDU{
		Version:           w.Version,
		Destination:       w.Destination,
		ProxyAuth:         w.ProxyAuth,
		ServerAuth:        w.ServerAuth,
		PreconnectionBlob: w.PreconnectionBlob,
		X224:              w.X224,
		ServerCertChain:   w.ServerCertChain,
		ServerAddr:        w.ServerAddr,
	}
	if w.Error != (errWire{}) {
		e := w.Error
		if e.Code < 0 || e.Code > 0xFFFF || e.HTTPStatus < 0 || e.HTTPStatus > 0xFFFF ||
			e.WSAError < 0 || e.WSAError > 0xFFFF || e.TLSAlert < 0 || e.TLSAlert > 0xFF {
			return nil, errors.New("rdcleanpath: error field out of range")
		}
		p.Error = &RDCleanPathError{Code: int(e.Code), HTTPStatus: int(e.HTTPStatus), WSAError: int(e.WSAError), TLSAlert: int(e.TLSAlert)}
	}
	return p, nil
}

// RDCleanPathLength returns the total length of the DER PDU that b begins
// with, reading only its header. It returns ErrRDCleanPathIncomplete when b
// is too short to tell, and an error when b cannot begin a PDU or the PDU
// would exceed MaxRDCleanPathPDU.
func RDCleanPathLength(b []byte) (int, error) {
	n, err := derLength(b, 0x30)
	if errors.Is(err, errDERIncomplete) {
		return 0, ErrRDCleanPathIncomplete
	}
	if err != nil {
		return 0, fmt.Errorf("rdcleanpath: %w", err)
	}
	if n > MaxRDCleanPathPDU {
		return 0, fmt.Errorf("rdcleanpath: PDU of %d bytes exceeds %d", n, MaxRDCleanPathPDU)
	}
	return n, nil
}

// errDERIncomplete is returned by derLength when b is too short to tell.
var errDERIncomplete = errors.New("incomplete DER header")

// derLength returns the total length (header included) of the DER element
// with the given tag at the start of b. Lengths above 2^31 are refused.
func derLength(b []byte, tag byte) (int, error) {
	if len(b) < 2 {
		return 0, errDERIncomplete
	}
	if b[0] != tag {
		return 0, fmt.Errorf("tag 0x%02x, want 0x%02x", b[0], tag)
	}
	l := int(b[1])
	if l < 0x80 {
		return 2 + l, nil
	}
	k := l & 0x7f
	if k == 0 || k > 4 {
		return 0, fmt.Errorf("unsupported DER length form 0x%02x", b[1])
	}
	if len(b) < 2+k {
		return 0, errDERIncomplete
	}
	n := 0
	for _, c := range b[2 : 2+k] {
		n = n<<8 | int(c)
	}
	if n < 0x80 || (k > 1 && b[2] == 0) || n > 1<<31-1-6 {
		return 0, fmt.Errorf("non-minimal or oversized DER length")
	}
	return 2 + k + n, nil
}
