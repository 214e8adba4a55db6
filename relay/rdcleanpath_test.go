package relay

import (
	"bytes"
	"encoding/hex"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// dead is the 4-byte payload IronRDP's vectors use everywhere.
var dead = []byte{0xDE, 0xAD, 0xBE, 0xFF}

// rdcleanpathVectors are the PDUs and DER bytes of IronRDP's published test
// vectors (ironrdp-testsuite-core/tests/rdcleanpath.rs), written out here
// so that our codec is checked byte for byte against the client's.
var rdcleanpathVectors = []struct {
	name string
	pdu  RDCleanPathPDU
	der  string
}{
	{
		name: "request",
		pdu: RDCleanPathPDU{Version: RDCleanPathVersion, Destination: "destination", ProxyAuth: "proxy auth",
			PreconnectionBlob: "PCB", X224: dead},
		der: "3032 a004 0202 0d3e a20d 0c0b 64657374696e6174696f6e a30c 0c0a 70726f78792061757468" +
			"a505 0c03 504342 a606 0404 deadbeff",
	},
	{
		name: "response",
		pdu: RDCleanPathPDU{Version: RDCleanPathVersion, X224: dead,
			ServerCertChain: [][]byte{dead, dead, dead}, ServerAddr: "192.168.7.95"},
		der: "3034 a004 0202 0d3e a606 0404 deadbeff a714 3012 0404 deadbeff 0404 deadbeff 0404 deadbeff" +
			"a90e 0c0c 3139322e3136382e372e3935",
	},
	{
		name: "http error",
		pdu:  RDCleanPathPDU{Version: RDCleanPathVersion, Error: &RDCleanPathError{Code: RDCleanPathGeneralError, HTTPStatus: 500}},
		der:  "3015 a004 0202 0d3e a10d 300b a003 020101 a104 0202 01f4",
	},
	{
		name: "tls error",
		pdu:  RDCleanPathPDU{Version: RDCleanPathVersion, Error: &RDCleanPathError{Code: RDCleanPathGeneralError, TLSAlert: 48}},
		der:  "3014 a004 0202 0d3e a10c 300a a003 020101 a303 020130",
	},
}

func mustHex(tb testing.TB, s string) []byte {
	tb.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

func TestRDCleanPath_Vectors(t *testing.T) {
	for _, v := range rdcleanpathVectors {
		t.Run(v.name, func(t *testing.T) {
			want := mustHex(t, v.der)
			got, err := v.pdu.Marshal()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("Marshal =\n%x\nwant\n%x", got, want)
			}
			back, err := UnmarshalRDCleanPath(want)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*back, v.pdu) {
				t.Errorf("Unmarshal = %+v; want %+v", *back, v.pdu)
			}
			n, err := RDCleanPathLength(want[:2])
			if err != nil || n != len(want) {
				t.Errorf("RDCleanPathLength(header) = %d, %v; want %d", n, err, len(want))
			}
		})
	}
}

func TestRDCleanPath_NegotiationErrorCarriesX224(t *testing.T) {
	p := RDCleanPathPDU{Version: RDCleanPathVersion, Error: &RDCleanPathError{Code: RDCleanPathNegotiationError}, X224: dead}
	b, err := p.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := UnmarshalRDCleanPath(b)
	if err != nil {
		t.Fatal(err)
	}
	if back.Error == nil || back.Error.Code != 2 || !bytes.Equal(back.X224, dead) {
		t.Errorf("round trip = %+v; want code 2 with the X.224 bytes", back)
	}
}

func TestRDCleanPath_Malformed(t *testing.T) {
	req := mustHex(t, rdcleanpathVectors[0].der)
	wrongVersion := bytes.Clone(req)
	wrongVersion[7] = 0x3d // 3389
	big := append([]byte{0x30, 0x83, 0x01, 0x00, 0x00}, make([]byte, 0x10000)...)
	tests := []struct {
		name string
		in   []byte
	}{
		{"empty", nil},
		{"garbage", []byte("GET / HTTP/1.1\r\n\r\n")},
		{"truncated", req[:len(req)-1]},
		{"trailing", append(bytes.Clone(req), 0)},
		{"version 3389", wrongVersion},
		{"no version", mustHex(t, "3006 a204 0c02 6869")},
		{"not utf8", mustHex(t, "300e a004 0202 0d3e a206 0c04 fffefdfc")},
		{"error code out of range", mustHex(t, "3015 a004 0202 0d3e a10d 300b a003 020101 a304 0202 0100")},
		{"oversized", big},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if p, err := UnmarshalRDCleanPath(tc.in); err == nil {
				t.Errorf("UnmarshalRDCleanPath(%x…) = %+v; want an error", tc.in[:min(len(tc.in), 16)], p)
			}
		})
	}
}

func TestRDCleanPathLength(t *testing.T) {
	tests := []struct {
		in      string
		want    int
		wantErr error // nil: success; errAny: some error
	}{
		{"", 0, ErrRDCleanPathIncomplete},
		{"30", 0, ErrRDCleanPathIncomplete},
		{"3032", 0x34, nil},
		{"3081", 0, ErrRDCleanPathIncomplete},
		{"308180", 0x83, nil},
		{"3082 0100", 0x104, nil},
		{"3083 00ffff", 0, errAny}, // non-minimal
		{"307f", 0x81, nil},
		{"3081 7f", 0, errAny}, // non-minimal
		{"3080", 0, errAny},    // indefinite (BER)
		{"3083 010000", 0, errAny},
		{"0402", 0, errAny},
		{"3085 0000000001", 0, errAny},
	}
	for _, tc := range tests {
		n, err := RDCleanPathLength(mustHex(t, tc.in))
		switch {
		case tc.wantErr == nil && (err != nil || n != tc.want):
			t.Errorf("RDCleanPathLength(%s) = %d, %v; want %d", tc.in, n, err, tc.want)
		case tc.wantErr == errAny && err == nil:
			t.Errorf("RDCleanPathLength(%s) = %d; want an error", tc.in, n)
		case tc.wantErr != nil && tc.wantErr != errAny && !errors.Is(err, tc.wantErr):
			t.Errorf("RDCleanPathLength(%s) = %d, %v; want %v", tc.in, n, err, tc.wantErr)
		}
	}
}

var errAny = errors.New("any error")

// FuzzUnmarshalRDCleanPath checks that no input panics the decoder and that
// whatever decodes encodes back to something that decodes the same.
func FuzzUnmarshalRDCleanPath(f *testing.F) {
	for _, v := range rdcleanpathVectors {
		f.Add(mustHex(f, v.der))
	}
	f.Add([]byte{0x30, 0x84, 0x7f, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		if n, err := RDCleanPathLength(b); err == nil && (n < 2 || n > MaxRDCleanPathPDU) {
			t.Fatalf("RDCleanPathLength = %d outside [2, %d]", n, MaxRDCleanPathPDU)
		}
		p, err := UnmarshalRDCleanPath(b)
		if err != nil {
			return
		}
		again, err := p.Marshal()
		if err != nil {
			if p.Error != nil && p.Error.Code == 0 {
				return // a zero code cannot be written back: it means "no error"
			}
			t.Fatalf("Marshal of a decoded PDU: %v", err)
		}
		q, err := UnmarshalRDCleanPath(again)
		if err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if !reflect.DeepEqual(normalize(p), normalize(q)) {
			t.Fatalf("round trip changed the PDU:\n%+v\n%+v", p, q)
		}
	})
}

// normalize maps empty slices to nil, which the wire cannot tell apart.
func normalize(p *RDCleanPathPDU) RDCleanPathPDU {
	c := *p
	if len(c.X224) == 0 {
		c.X224 = nil
	}
	if len(c.ServerCertChain) == 0 {
		c.ServerCertChain = nil
	}
	for i, b := range c.ServerCertChain {
		if len(b) == 0 {
			c.ServerCertChain[i] = []byte{}
		}
	}
	return c
}
