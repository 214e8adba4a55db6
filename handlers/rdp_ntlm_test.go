package handlers

import (
	"crypto/hmac"
	"crypto/md5"
	"crypto/rand"
	"crypto/rc4"
	"crypto/sha256"
	"crypto/x509"
	"encoding/asn1"
	"encoding/binary"
	"strings"
	"testing"
	"time"
	"unicode/utf16"
)

// Just enough of a CredSSP/NTLMv2 client ([MS-CSSP], [MS-NLMP]) to sign in
// to freerdp-shadow through the gateway the way IronRDP does, so that the
// gateway tests can tell a good password from a wrong one without a browser.

// tsReq is a CredSSP TSRequest ([MS-CSSP] 2.2.1).
type tsReq struct {
	Version     int         `asn1:"explicit,tag:0"`
	NegoTokens  []negoToken `asn1:"optional,explicit,tag:1"`
	AuthInfo    []byte      `asn1:"optional,explicit,tag:2"`
	PubKeyAuth  []byte      `asn1:"optional,explicit,tag:3"`
	ErrorCode   int64       `asn1:"optional,explicit,tag:4"`
	ClientNonce []byte      `asn1:"optional,explicit,tag:5"`
}

type negoToken struct {
	Token []byte `asn1:"explicit,tag:0"`
}

func mustTSRequest(t *testing.T, r tsReq) []byte {
	t.Helper()
	b, err := asn1.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func randomBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

// NTLM flags the test client asks for ([MS-NLMP] 2.2.2.5): unicode, target,
// sign, seal, NTLM, always sign, extended session security, target info,
// version, 128-bit, key exchange, 56-bit.
const ntlmFlags = 0x00000001 | 0x00000004 | 0x00000010 | 0x00000020 | 0x00000200 | 0x00008000 |
	0x00080000 | 0x00800000 | 0x02000000 | 0x20000000 | 0x40000000 | 0x80000000

// ntlmNegotiate is an NTLM NEGOTIATE_MESSAGE without domain or workstation.
func ntlmNegotiate() []byte {
	b := append([]byte("NTLMSSP\x00"), 1, 0, 0, 0)
	b = binary.LittleEndian.AppendUint32(b, ntlmFlags)
	b = append(b, make([]byte, 16)...) // empty domain and workstation fields
	return append(b, 6, 1, 0, 0, 0, 0, 0, 15)
}

func hmacMD5(key []byte, parts ...[]byte) []byte {
	m := hmac.New(md5.New, key)
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)
}

// ntlmAuthenticate returns an NTLMv2 AUTHENTICATE_MESSAGE for user answering
// challenge, and the exported session key. With ntHash nil the NTProofStr is
// random: the server cannot tell it from one made with a wrong password.
func ntlmAuthenticate(t *testing.T, challenge []byte, user string, ntHash []byte) (msg, sessionKey []byte) {
	t.Helper()
	if len(challenge) < 48 {
		t.Fatalf("NTLM CHALLENGE of %d bytes", len(challenge))
	}
	serverChallenge := challenge[24:32]
	tiLen := int(binary.LittleEndian.Uint16(challenge[40:]))
	tiOff := int(binary.LittleEndian.Uint32(challenge[44:]))
	if tiOff+tiLen > len(challenge) {
		t.Fatal("NTLM CHALLENGE target info out of bounds")
	}
	targetInfo := challenge[tiOff : tiOff+tiLen]
	// The blob's time is the server's MsvAvTimestamp when it sent one
	// ([MS-NLMP] 3.1.5.1.2), else now.
	ts := binary.LittleEndian.AppendUint64(nil, uint64(time.Now().UnixNano()/100+116444736000000000))
	for av := targetInfo; len(av) >= 4; {
		id, n := binary.LittleEndian.Uint16(av), int(binary.LittleEndian.Uint16(av[2:]))
		if id == 0 || len(av) < 4+n {
			break
		}
		if id == 7 && n == 8 {
			ts = append([]byte{}, av[4:12]...)
		}
		av = av[4+n:]
	}
	blob := append([]byte{1, 1, 0, 0, 0, 0, 0, 0}, ts...)
	blob = append(blob, randomBytes(8)...)
	blob = append(blob, 0, 0, 0, 0)
	blob = append(blob, targetInfo...)
	blob = append(blob, 0, 0, 0, 0)

	proof := randomBytes(16)
	keyExchangeKey := randomBytes(16)
	if ntHash != nil {
		ntowf := hmacMD5(ntHash, utf16le(strings.ToUpper(user)))
		proof = hmacMD5(ntowf, serverChallenge, blob)
		keyExchangeKey = hmacMD5(ntowf, proof) // the session base key, for NTLMv2
	}
	sessionKey = randomBytes(16)
	encrypted := make([]byte, 16)
	c, _ := rc4.NewCipher(keyExchangeKey)
	c.XORKeyStream(encrypted, sessionKey)

	fields := [][]byte{
		make([]byte, 24),       // LM response
		append(proof, blob...), // NT response: NTProofStr + blob
		nil,                    // domain
		utf16le(user),          // user
		utf16le("TEST"),        // workstation
		encrypted,              // encrypted random session key
	}
	b := append([]byte("NTLMSSP\x00"), 3, 0, 0, 0)
	off := 88
	var payload []byte
	for _, f := range fields {
		b = binary.LittleEndian.AppendUint16(b, uint16(len(f)))
		b = binary.LittleEndian.AppendUint16(b, uint16(len(f)))
		b = binary.LittleEndian.AppendUint32(b, uint32(off+len(payload)))
		payload = append(payload, f...)
	}
	b = binary.LittleEndian.AppendUint32(b, ntlmFlags)
	b = append(b, 6, 1, 0, 0, 0, 0, 0, 15) // version
	b = append(b, make([]byte, 16)...)     // MIC (not asked for)
	return append(b, payload...), sessionKey
}

// credSSPPubKeyAuth returns the client's pubKeyAuth for CredSSP version 5 and
// later: the SHA-256 binding hash of nonce and the server's public key,
// sealed with the first NTLM client-to-server sealing key (sequence 0).
func credSSPPubKeyAuth(t *testing.T, sessionKey, nonce, serverCert []byte) []byte {
	t.Helper()
	cert, err := x509.ParseCertificate(serverCert)
	if err != nil {
		t.Fatal(err)
	}
	var spki struct {
		Algorithm asn1.RawValue
		PublicKey asn1.BitString
	}
	if _, err := asn1.Unmarshal(cert.RawSubjectPublicKeyInfo, &spki); err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	h.Write([]byte("CredSSP Client-To-Server Binding Hash\x00"))
	h.Write(nonce)
	h.Write(spki.PublicKey.Bytes)
	msg := h.Sum(nil)

	sign := md5.Sum(append(append([]byte{}, sessionKey...), "session key to client-to-server signing key magic constant\x00"...))
	seal := md5.Sum(append(append([]byte{}, sessionKey...), "session key to client-to-server sealing key magic constant\x00"...))
	rc, _ := rc4.NewCipher(seal[:])
	sealed := make([]byte, len(msg))
	rc.XORKeyStream(sealed, msg)
	seq := []byte{0, 0, 0, 0}
	checksum := hmacMD5(sign[:], seq, msg)[:8]
	rc.XORKeyStream(checksum, checksum)
	sig := append([]byte{1, 0, 0, 0}, checksum...)
	sig = append(sig, seq...)
	return append(sig, sealed...)
}

func utf16le(s string) []byte {
	var b []byte
	for _, c := range utf16.Encode([]rune(s)) {
		b = binary.LittleEndian.AppendUint16(b, c)
	}
	return b
}
