package portal

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/corral-dev/corral-vdi-portal/connid"
)

func TestParseListen(t *testing.T) {
	for _, tc := range []struct {
		in      string
		tcp     string
		unix    []string
		wantErr string
	}{
		{"127.0.0.1:8080", "127.0.0.1:8080", nil, ""},
		{"127.0.0.1:8080,unix:/run/corral-vdi/http.sock", "127.0.0.1:8080", []string{"/run/corral-vdi/http.sock"}, ""},
		{" unix:/a.sock , [::1]:9 ,unix:/b.sock", "[::1]:9", []string{"/a.sock", "/b.sock"}, ""},
		{"unix:/run/corral-vdi/http.sock", "", nil, "names no TCP address"},
		{"127.0.0.1:1,127.0.0.1:2", "", nil, "give one TCP address"},
		{"127.0.0.1:8080,unix:run/http.sock", "", nil, "clean absolute path"},
		{"127.0.0.1:8080,unix:/" + strings.Repeat("x", 120), "", nil, "longer than"},
		{"8080", "", nil, "missing port"},
	} {
		tcp, unix, err := parseListen(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "CORRAL_VDI_LISTEN") {
				t.Errorf("parseListen(%q) = %v; want an error naming CORRAL_VDI_LISTEN with %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil || tcp != tc.tcp || !slices.Equal(unix, tc.unix) {
			t.Errorf("parseListen(%q) = %q, %q, %v; want %q, %q", tc.in, tcp, unix, err, tc.tcp, tc.unix)
		}
	}
}

func TestCheckTrustedProxies(t *testing.T) {
	host := []connid.HostPrefix{{Prefix: netip.MustParsePrefix("172.17.0.1/32"), Dev: "docker0"}, {Prefix: netip.MustParsePrefix("fe80::1/128"), Dev: "eth0"},
		{Prefix: netip.MustParsePrefix("198.18.0.0/24"), Dev: "lo"}} // a local route: ip route add local 198.18.0.0/24 dev lo

	for _, tc := range []struct {
		prefixes string
		bad      string
	}{
		{"127.0.0.1/32,::1/128", ""},
		{"100.64.0.0/10", ""},
		{"127.0.0.1/32,172.16.0.0/12", "172.16.0.0/12 covers 172.17.0.1 (docker0)"},
		{"0.0.0.0/0", "covers 172.17.0.1"},
		{"fe80::/10", "covers fe80::1 (eth0)"},
		{"198.18.0.0/15", "covers 198.18.0.0/24 (lo)"},
		{"198.18.0.7/32", "198.18.0.7/32 lies in 198.18.0.0/24 (lo)"},
		{"198.18.1.0/24", ""},
	} {
		var prefixes []netip.Prefix
		for _, p := range strings.Split(tc.prefixes, ",") {
			prefixes = append(prefixes, netip.MustParsePrefix(p))
		}
		err := checkTrustedProxies(prefixes, host)
		switch {
		case tc.bad == "" && err != nil:
			t.Errorf("checkTrustedProxies(%s) = %v; want nil", tc.prefixes, err)
		case tc.bad != "" && (err == nil || !strings.Contains(err.Error(), tc.bad) || strings.Contains(err.Error(), "\n")):
			t.Errorf("checkTrustedProxies(%s) = %v; want one line with %q", tc.prefixes, err, tc.bad)
		}
	}
}
