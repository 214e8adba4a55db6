package relay

import (
	"context"
	"encoding/asn1"
	"errors"
	"fmt"
	"io"
	"math/big"
	"time"

	"github.com/gorilla/websocket"
)

// CloseRDPLogonFailed is the websocket close code PipeRDP sends when the
// RDP server refused the NLA sign-in. IronRDP's client otherwise sees only
// a dropped connection, so the page needs this to say "wrong password".
const CloseRDPLogonFailed = 4001

// statusLogonFailure is NTSTATUS STATUS_LOGON_FAILURE: unknown user name or
// bad password.
const statusLogonFailure uint32 = 0xC000006D

// credSSPTimeout bounds the NLA exchange, which the client runs on its own
// without waiting for the user.
const credSSPTimeout = 30 * time.Second

// maxTSRequest caps one CredSSP message. NTLM messages are a few hundred
// bytes; Kerberos tickets a few kilobytes.
const maxTSRequest = 64 << 10

// RDPLogonError reports that the RDP server refused the client's NLA
// sign-in: it answered with an error status or hung up after the client
// proved its credentials.
type RDPLogonError struct {
	// Status is the NTSTATUS the server sent, or 0 when it just hung up.
	Status uint32
}

// Error says the sign-in was refused, with the status when it is not the
// usual wrong user name or password.
func (e *RDPLogonError) Error() string {
	if e.Status != 0 && e.Status != statusLogonFailure {
		return fmt.Sprintf("the RDP server refused the sign-in (NTSTATUS 0x%08X)", e.Status)
	}
	return "the RDP server refused the sign-in: wrong user name or password"
}

// PipeRDP relays an RDP session after RDCleanPath: first the CredSSP (NLA)
// exchange message by message, watching for the server refusing the
// sign-in, then everything else with Pipe. When the server refuses the
// sign-in the client gets close code CloseRDPLogonFailed and the error is
// an *RDPLogonError. Only message framing is inspected, never logged.
// OnInput sees only what follows the sign-in. Both connections are closed
// when it returns.
func PipeRDP(ctx context.Context, ws *websocket.Conn, s *RDPStream, opts Options) (Stats, error) {
	if opts.Counters == nil {
		opts.Counters = new(Counters)
	}
	ws.SetReadLimit(maxTSRequest)
	first, err := credSSP(ctx, ws, s, opts.Counters)
	if err != nil {
		code, reason := websocket.CloseInternalServerErr, "RDP sign-in failed"
		var le *RDPLogonError
		if errors.As(err, &le) {
			code, reason = CloseRDPLogonFailed, "wrong user name or password"
		}
		s.Close()
		closeWebSocket(ws, code, reason, time.Now().Add(closeGrace))
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return first, err
	}
	rest, err := Pipe(ctx, ws, s, opts)
	return Stats{BytesIn: first.BytesIn + rest.BytesIn, BytesOut: first.BytesOut + rest.BytesOut}, err
}

// credSSP relays the CredSSP exchange: each client TSRequest but the last
// (the one carrying the credentials, authInfo) is answered by one server
// TSRequest. It returns once the client has sent something that is not a
// TSRequest (no NLA, or NLA done) or its authInfo, having forwarded it.
func credSSP(ctx context.Context, ws *websocket.Conn, s *RDPStream, counters *Counters) (Stats, error) {
	var st Stats
	deadline := time.Now().Add(credSSPTimeout)
	s.SetDeadline(deadline)
	ws.SetReadDeadline(deadline)
	stop := context.AfterFunc(ctx, func() {
		s.SetDeadline(time.Unix(1, 0))
		ws.SetReadDeadline(time.Unix(1, 0))
	})
	defer stop()

	toServer := func(b []byte) error {
		n, err := s.Write(b)
		st.BytesIn += int64(n)
		counters.in.Add(int64(n))
		return err
	}
	var pending []byte
	provedIdentity := false // the client sent its NTLM AUTHENTICATE / pubKeyAuth
	version := int64(6)     // the server's CredSSP version, for a synthesized answer
	for {
		if len(pending) == 0 || pending[0] == 0x30 {
			n, err := derLength(pending, 0x30)
			if len(pending) == 0 || errors.Is(err, errDERIncomplete) || (err == nil && len(pending) < n) {
				if err == nil && n > maxTSRequest {
					return st, fmt.Errorf("rdp: client CredSSP message of %d bytes", n)
				}
				_, msg, err := ws.ReadMessage()
				if err != nil {
					return st, fmt.Errorf("rdp: client during sign-in: %w", err)
				}
				pending = append(pending, msg...)
				continue
			}
			if err == nil {
				msg := pending[:n]
				pending = pending[n:]
				if err := toServer(msg); err != nil {
					return st, fmt.Errorf("rdp: server during sign-in: %w", err)
				}
				if tsRequestField(msg, 2) != nil { // authInfo: the credentials, last of CredSSP
					break
				}
				if tsRequestField(msg, 3) != nil { // pubKeyAuth goes with the NTLM AUTHENTICATE
					provedIdentity = true
				}
				answer, err := readTSRequest(s)
				if err != nil {
					if provedIdentity && ctx.Err() == nil && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || isConnReset(err)) {
						// Some servers (freerdp) hang up instead of sending
						// the status: tell the client what a server that
						// sends it would have, so it reports a logon failure.
						if b, err := asn1.Marshal(tsRequestError{Version: version, ErrorCode: signed32(statusLogonFailure)}); err == nil {
							ws.SetWriteDeadline(time.Now().Add(closeGrace))
							ws.WriteMessage(websocket.BinaryMessage, b)
						}
						return st, &RDPLogonError{}
					}
					return st, fmt.Errorf("rdp: server during sign-in: %w", err)
				}
				if v := tsRequestVersion(answer); v > 0 {
					version = v
				}
				ws.SetWriteDeadline(deadline)
				if err := ws.WriteMessage(websocket.BinaryMessage, answer); err != nil {
					return st, fmt.Errorf("rdp: client during sign-in: %w", err)
				}
				st.BytesOut += int64(len(answer))
				counters.out.Add(int64(len(answer)))
				if status := tsRequestStatus(answer); status != 0 {
					return st, &RDPLogonError{Status: status}
				}
				continue
			}
			// Malformed DER: not CredSSP after all; the server judges it.
		}
		break
	}
	if len(pending) > 0 {
		if err := toServer(pending); err != nil {
			return st, fmt.Errorf("rdp: server: %w", err)
		}
	}
	s.SetDeadline(time.Time{})
	ws.SetReadDeadline(time.Time{})
	ws.SetWriteDeadline(time.Time{})
	return st, nil
}

// readTSRequest reads one DER SEQUENCE from r without reading past it.
func readTSRequest(r io.Reader) ([]byte, error) {
	b := make([]byte, 2, 64)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	if b[0] != 0x30 {
		return nil, fmt.Errorf("server sent 0x%02x, not a TSRequest", b[0])
	}
	if b[1] > 0x80 {
		k := int(b[1] & 0x7f)
		if k > 4 {
			return nil, errors.New("bad TSRequest length")
		}
		b = b[:2+k]
		if _, err := io.ReadFull(r, b[2:]); err != nil {
			return nil, err
		}
	}
	n, err := derLength(b, 0x30)
	if err != nil {
		return nil, fmt.Errorf("bad TSRequest length: %w", err)
	}
	if n > maxTSRequest {
		return nil, fmt.Errorf("server TSRequest of %d bytes", n)
	}
	msg := make([]byte, n)
	copy(msg, b)
	if _, err := io.ReadFull(r, msg[len(b):]); err != nil {
		return nil, err
	}
	return msg, nil
}

// tsRequestField returns the content of the context-tagged field [tag] of
// a TSRequest ([MS-CSSP] 2.2.1), or nil if it has none or is malformed.
func tsRequestField(msg []byte, tag int) []byte {
	var seq asn1.RawValue
	if _, err := asn1.Unmarshal(msg, &seq); err != nil || seq.Tag != asn1.TagSequence {
		return nil
	}
	rest := seq.Bytes
	for len(rest) > 0 {
		var f asn1.RawValue
		var err error
		if rest, err = asn1.Unmarshal(rest, &f); err != nil {
			return nil
		}
		if f.Class == asn1.ClassContextSpecific && f.Tag == tag {
			return f.Bytes
		}
	}
	return nil
}

// tsRequestStatus returns the errorCode [4] of a TSRequest as an NTSTATUS,
// or 0 when it carries none.
func tsRequestStatus(msg []byte) uint32 {
	f := tsRequestField(msg, 4)
	if f == nil {
		return 0
	}
	var n *big.Int
	if _, err := asn1.Unmarshal(f, &n); err != nil || n == nil {
		return 0
	}
	// Servers write NTSTATUS as a signed or an unsigned 32-bit integer.
	return uint32(n.Int64())
}

// tsRequestError is a TSRequest carrying only an error status. The status
// is written as a signed 32-bit integer, 4 bytes, as IronRDP reads it.
type tsRequestError struct {
	Version   int64 `asn1:"explicit,tag:0"`
	ErrorCode int64 `asn1:"explicit,tag:4"`
}

// tsRequestVersion returns the version [0] of a TSRequest, or 0.
func tsRequestVersion(msg []byte) int64 {
	var v int64
	if f := tsRequestField(msg, 0); f != nil {
		asn1.Unmarshal(f, &v)
	}
	return v
}

// signed32 returns the value of u read as a signed 32-bit integer.
func signed32(u uint32) int64 { return int64(int32(u)) }
