package relay

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"syscall"
	"time"
	"unicode/utf16"

	"github.com/gorilla/websocket"
)

// The RDCleanPath gateway, in the order a connection goes through it:
// ReadRDCleanPathRequest, (the caller checks the token and dials the server
// it chose itself), RDPConnect, AcceptRDCleanPath, PipeRDP. Any failure
// before PipeRDP goes to the client with RejectRDCleanPath.

// rdpHandshakeTimeout bounds the gateway's part of the handshake: the
// request, the X.224 exchange and the TLS handshake with the server.
const rdpHandshakeTimeout = 15 * time.Second

// Windows socket errors IronRDP understands in an RDCleanPath error.
const (
	wsaTimedOut     = 10060
	wsaRefused      = 10061
	wsaHostUnreach  = 10065
	wsaNetUnreach   = 10051
	wsaConnReset    = 10054
	tlsAlertUnknown = 80 // internal_error
)

// RDPError is a gateway failure together with the RDCleanPath error the
// client is told. Its text is for logs: it never holds tokens or payload.
type RDPError struct {
	// Reply is what the client gets.
	Reply RDCleanPathError
	// X224 is the server's X.224 answer, sent along with a negotiation failure.
	X224 []byte
	// Msg says what failed.
	Msg string
	// Err is the cause, if any.
	Err error
}

// Error returns what failed and why, for logs.
func (e *RDPError) Error() string {
	if e.Err != nil {
		return e.Msg + ": " + e.Err.Error()
	}
	return e.Msg
}

// Unwrap returns the cause.
func (e *RDPError) Unwrap() error { return e.Err }

// RDPHTTPError returns a general RDCleanPath failure carrying an HTTP status,
// for refusals such as a bad token (401, 403) or a malformed request (400).
func RDPHTTPError(status int, msg string, err error) *RDPError {
	return &RDPError{Reply: RDCleanPathError{Code: RDCleanPathGeneralError, HTTPStatus: status}, Msg: msg, Err: err}
}

// RDPDialError maps a failure to reach the RDP server to the Windows socket
// error IronRDP shows for it.
func RDPDialError(err error) *RDPError {
	wsa := 0
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, os.ErrNotExist), errors.Is(err, syscall.ENOENT):
		wsa = wsaRefused
	case errors.Is(err, syscall.EHOSTUNREACH):
		wsa = wsaHostUnreach
	case errors.Is(err, syscall.ENETUNREACH):
		wsa = wsaNetUnreach
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		wsa = wsaTimedOut
	}
	if wsa == 0 {
		return RDPHTTPError(http.StatusBadGateway, "RDP server unreachable", err)
	}
	return &RDPError{Reply: RDCleanPathError{Code: RDCleanPathGeneralError, WSAError: wsa}, Msg: "RDP server unreachable", Err: err}
}

// ReadRDCleanPathRequest reads the client's request: exactly one PDU, which
// may span several websocket messages, at most MaxRDCleanPathPDU bytes, within
// the handshake timeout. Every error is an *RDPError (HTTP 400 for anything
// malformed) unless the client went away.
func ReadRDCleanPathRequest(ws *websocket.Conn) (*RDCleanPathPDU, error) {
	ws.SetReadLimit(MaxRDCleanPathPDU)
	ws.SetReadDeadline(time.Now().Add(rdpHandshakeTimeout))
	defer ws.SetReadDeadline(time.Time{})
	var buf []byte
	want := -1
	for want < 0 || len(buf) < want {
		_, msg, err := ws.ReadMessage()
		if err != nil {
			if errors.Is(err, websocket.ErrReadLimit) {
				return nil, RDPHTTPError(http.StatusRequestEntityTooLarge, "RDCleanPath request too large", err)
			}
			return nil, fmt.Errorf("rdcleanpath: read request: %w", err)
		}
		buf = append(buf, msg...)
		if len(buf) > MaxRDCleanPathPDU {
			return nil, RDPHTTPError(http.StatusRequestEntityTooLarge, "RDCleanPath request too large", nil)
		}
		if want < 0 {
			n, err := RDCleanPathLength(buf)
			if errors.Is(err, ErrRDCleanPathIncomplete) {
				continue
			}
			if err != nil {
				return nil, RDPHTTPError(http.StatusBadRequest, "not an RDCleanPath request", err)
			}
			want = n
		}
	}
	if len(buf) > want {
		return nil, RDPHTTPError(http.StatusBadRequest, "data after the RDCleanPath request", nil)
	}
	req, err := UnmarshalRDCleanPath(buf)
	if err != nil {
		return nil, RDPHTTPError(http.StatusBadRequest, "malformed RDCleanPath request", err)
	}
	switch {
	case req.Error != nil || req.ServerAddr != "" || len(req.ServerCertChain) > 0:
		return nil, RDPHTTPError(http.StatusBadRequest, "RDCleanPath PDU is not a request", nil)
	case len(req.X224) == 0:
		return nil, RDPHTTPError(http.StatusBadRequest, "RDCleanPath request without an X.224 Connection Request", nil)
	case req.ProxyAuth == "":
		return nil, RDPHTTPError(http.StatusUnauthorized, "RDCleanPath request without a token", nil)
	}
	return req, nil
}

// RDPStream is the TLS connection to an RDP server after RDPConnect: reads
// and writes are the RDP plaintext. Close drops the connection without a
// TLS close_notify, so that it never waits behind a blocked write.
type RDPStream struct {
	*tls.Conn
	raw net.Conn
}

// Close closes the underlying connection.
func (s *RDPStream) Close() error { return s.raw.Close() }

// RDPConnect does the gateway's half of the handshake on conn, a fresh
// connection to the RDP server the caller chose: it sends the request's
// preconnection blob, forwards its X.224 Connection Request unchanged, reads
// the Confirm, and does the TLS client handshake. It returns the stream and
// the response for the client (version, Confirm, certificate chain leaf
// first, serverAddr). An RDP negotiation failure is answered before TLS with
// error code 2 and the server's bytes. On error conn is closed and the error
// is an *RDPError.
//
// The server's certificate is not verified: the portal picked the server
// from its own records, and the client, which holds the credentials, sees
// the chain and binds its CredSSP exchange to the server's key.
func RDPConnect(ctx context.Context, conn net.Conn, req *RDCleanPathPDU, serverAddr string) (s *RDPStream, resp *RDCleanPathPDU, err error) {
	defer func() {
		if err != nil {
			conn.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, rdpHandshakeTimeout)
	defer cancel()
	deadline, _ := ctx.Deadline()
	conn.SetDeadline(deadline)
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	if err := checkX224Request(req.X224); err != nil {
		return nil, nil, RDPHTTPError(http.StatusBadRequest, "bad X.224 Connection Request", err)
	}
	if req.PreconnectionBlob != "" {
		if _, err := conn.Write(preconnectionPDU(req.PreconnectionBlob)); err != nil {
			return nil, nil, serverError("send preconnection blob", err)
		}
	}
	if _, err := conn.Write(req.X224); err != nil {
		return nil, nil, serverError("send X.224 Connection Request", err)
	}
	cc, err := readTPKT(conn)
	if err != nil {
		return nil, nil, serverError("read X.224 Connection Confirm", err)
	}
	if len(cc) < 11 || cc[5]&0xf0 != 0xd0 {
		return nil, nil, RDPHTTPError(http.StatusBadGateway, "server did not answer with an X.224 Connection Confirm", nil)
	}
	// Without a negotiation response the server wants standard RDP security,
	// which has no TLS to terminate; a failure says why it refused.
	if len(cc) < 19 || cc[11] != 0x02 || binary.LittleEndian.Uint32(cc[15:19]) == 0 {
		return nil, nil, &RDPError{Reply: RDCleanPathError{Code: RDCleanPathNegotiationError}, X224: cc, Msg: "RDP negotiation failed"}
	}

	tc := tls.Client(conn, &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12})
	if err := tc.HandshakeContext(ctx); err != nil {
		var alert tls.AlertError
		if errors.As(err, &alert) {
			return nil, nil, &RDPError{Reply: RDCleanPathError{Code: RDCleanPathGeneralError, TLSAlert: int(alert)}, Msg: "TLS handshake with the RDP server", Err: err}
		}
		if ctx.Err() != nil || errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) {
			return nil, nil, serverError("TLS handshake with the RDP server", err)
		}
		return nil, nil, &RDPError{Reply: RDCleanPathError{Code: RDCleanPathGeneralError, TLSAlert: tlsAlertUnknown}, Msg: "TLS handshake with the RDP server", Err: err}
	}
	certs := tc.ConnectionState().PeerCertificates
	chain := make([][]byte, len(certs))
	for i, c := range certs {
		chain[i] = c.Raw
	}
	if len(chain) == 0 {
		return nil, nil, RDPHTTPError(http.StatusBadGateway, "RDP server sent no certificate", nil)
	}
	conn.SetDeadline(time.Time{})
	resp = &RDCleanPathPDU{Version: RDCleanPathVersion, X224: cc, ServerCertChain: chain, ServerAddr: serverAddr}
	return &RDPStream{Conn: tc, raw: conn}, resp, nil
}

// serverError reports the server failing or hanging up mid-handshake.
func serverError(what string, err error) *RDPError {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return &RDPError{Reply: RDCleanPathError{Code: RDCleanPathGeneralError, WSAError: wsaTimedOut}, Msg: what, Err: err}
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) {
		return &RDPError{Reply: RDCleanPathError{Code: RDCleanPathGeneralError, WSAError: wsaConnReset}, Msg: what + ": the server hung up", Err: err}
	}
	return RDPHTTPError(http.StatusBadGateway, what, err)
}

// checkX224Request sanity-checks a client's X.224 Connection Request: one
// TPKT whose length matches, holding a CR TPDU.
func checkX224Request(b []byte) error {
	switch {
	case len(b) < 11:
		return fmt.Errorf("%d bytes is too short", len(b))
	case b[0] != 3:
		return errors.New("not a TPKT")
	case int(binary.BigEndian.Uint16(b[2:4])) != len(b):
		return errors.New("TPKT length does not match")
	case int(b[4]) != len(b)-5:
		return errors.New("X.224 length indicator does not match")
	case b[5]&0xf0 != 0xe0:
		return errors.New("not a Connection Request")
	}
	return nil
}

// readTPKT reads one TPKT packet (header included).
func readTPKT(r io.Reader) ([]byte, error) {
	hdr := make([]byte, 4)
	if _, err := io.ReadFull(r, hdr); err != nil {
		return nil, err
	}
	n := int(binary.BigEndian.Uint16(hdr[2:4]))
	if hdr[0] != 3 || n < 7 {
		return nil, fmt.Errorf("not a TPKT (% x)", hdr)
	}
	b := make([]byte, n)
	copy(b, hdr)
	if _, err := io.ReadFull(r, b[4:]); err != nil {
		return nil, err
	}
	return b, nil
}

// preconnectionPDU encodes blob as an RDP_PRECONNECTION_PDU_V2 ([MS-RDPEPS]
// 2.2.1.2): header, id 0, and the blob as a NUL-terminated UTF-16LE string.
func preconnectionPDU(blob string) []byte {
	u := append(utf16.Encode([]rune(blob)), 0)
	size := 16 + 2 + 2*len(u)
	b := make([]byte, 0, size)
	b = binary.LittleEndian.AppendUint32(b, uint32(size))
	b = binary.LittleEndian.AppendUint32(b, 0) // flags
	b = binary.LittleEndian.AppendUint32(b, 2) // version 2
	b = binary.LittleEndian.AppendUint32(b, 0) // id
	b = binary.LittleEndian.AppendUint16(b, uint16(len(u)))
	for _, c := range u {
		b = binary.LittleEndian.AppendUint16(b, c)
	}
	return b
}

// AcceptRDCleanPath sends the successful response to the client.
func AcceptRDCleanPath(ws *websocket.Conn, resp *RDCleanPathPDU) error {
	b, err := resp.Marshal()
	if err != nil {
		return err
	}
	ws.SetWriteDeadline(time.Now().Add(rdpHandshakeTimeout))
	defer ws.SetWriteDeadline(time.Time{})
	return ws.WriteMessage(websocket.BinaryMessage, b)
}

// RejectRDCleanPath answers the client with the RDCleanPath error err stands
// for (an *RDPError, else a general error with HTTP 500), closes the
// websocket cleanly and returns once the client answered the close or a
// second passed.
func RejectRDCleanPath(ws *websocket.Conn, err error) {
	reply := RDCleanPathError{Code: RDCleanPathGeneralError, HTTPStatus: http.StatusInternalServerError}
	var x224 []byte
	var re *RDPError
	if errors.As(err, &re) {
		reply, x224 = re.Reply, re.X224
	}
	pdu := RDCleanPathPDU{Version: RDCleanPathVersion, Error: &reply, X224: x224}
	deadline := time.Now().Add(closeGrace)
	if b, err := pdu.Marshal(); err == nil {
		ws.SetWriteDeadline(deadline)
		ws.WriteMessage(websocket.BinaryMessage, b)
	}
	closeWebSocket(ws, websocket.CloseNormalClosure, "RDCleanPath request refused", deadline)
}

// closeWebSocket sends a close frame, waits until deadline for the client's
// answer while discarding its messages, and closes ws.
func closeWebSocket(ws *websocket.Conn, code int, reason string, deadline time.Time) {
	ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, reason), deadline)
	ws.SetReadDeadline(deadline)
	for {
		if _, _, err := ws.NextReader(); err != nil {
			break
		}
	}
	ws.Close()
}

func isConnReset(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
