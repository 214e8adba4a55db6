package handlers

import (
	"net/http/httptest"
	"testing"
)

func TestHostPolicy_AllowedHost(t *testing.T) {
	tests := []struct {
		listen string
		public []string
		host   string
		want   bool
	}{
		{"127.0.0.1:8080", nil, "127.0.0.1:8080", true},
		{"127.0.0.1:8080", nil, "localhost:8080", true},
		{"127.0.0.1:8080", nil, "app.localhost:8080", true},
		{"127.0.0.1:8080", nil, "[::1]:8080", true},
		{"127.0.0.1:8080", nil, "rebind.attacker.example:8080", false},
		{"127.0.0.1:8080", nil, "10.0.0.5:8080", false},
		{"127.0.0.1:8080", nil, "", false},
		{"0.0.0.0:8080", nil, "10.0.0.5:8080", true},
		{"0.0.0.0:8080", nil, "portal.internal:8080", false},
		{"10.0.0.5:8080", nil, "10.0.0.5:8080", true},
		{"10.0.0.5:8080", nil, "10.0.0.6:8080", false},
		{"portal.internal:8080", nil, "PORTAL.internal.:8080", true},
		{"0.0.0.0:8080", []string{"https://vdi.example.com"}, "vdi.example.com", true},
		{"0.0.0.0:8080", []string{"https://vdi.example.com/x", "https://b.example"}, "b.example:443", true},
		{"0.0.0.0:8080", []string{"https://vdi.example.com"}, "vdi.example.com.attacker.example", false},
	}
	for _, tt := range tests {
		p := newHostPolicy(tt.listen, tt.public)
		if got := p.allowedHost(tt.host); got != tt.want {
			t.Errorf("listen %s public %v: allowedHost(%q) = %v; want %v", tt.listen, tt.public, tt.host, got, tt.want)
		}
	}
}

func TestHostPolicy_AllowedOrigin(t *testing.T) {
	p := newHostPolicy("127.0.0.1:8080", []string{"https://vdi.example.com"})
	tests := []struct {
		host, origin string
		want         bool
	}{
		{"127.0.0.1:8080", "http://127.0.0.1:8080", true},
		{"127.0.0.1:8080", "https://127.0.0.1:8080", false}, // scheme counts
		{"127.0.0.1:8080", "http://127.0.0.1:8081", false},  // port counts
		{"127.0.0.1:8080", "http://localhost:8080", false},  // host counts
		{"localhost:8080", "http://LOCALHOST:8080", true},
		{"127.0.0.1:8080", "null", false},
		{"127.0.0.1:8080", "http://evil.example", false},
		{"vdi.example.com", "https://vdi.example.com", true},
		{"vdi.example.com", "https://vdi.example.com:443", true},
		{"vdi.example.com", "http://vdi.example.com", false}, // a public name only at its public origin
		{"127.0.0.1:8080", "https://vdi.example.com", true},  // a proxy that rewrote Host
		{"rebind.attacker.example:8080", "http://rebind.attacker.example:8080", false},
	}
	for _, tt := range tests {
		r := httptest.NewRequest("POST", "http://"+tt.host+"/signin", nil)
		r.Host = tt.host
		if got := p.allowedOrigin(r, tt.origin); got != tt.want {
			t.Errorf("allowedOrigin(Host %q, Origin %q) = %v; want %v", tt.host, tt.origin, got, tt.want)
		}
	}
}
