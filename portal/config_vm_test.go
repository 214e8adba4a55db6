package portal

import (
	"strings"
	"testing"
)

// TestParseConfig_VMListenAndImageCache: the local VM settings that the
// local package used to read from the environment itself keep their env
// names and meaning, take flags too, and a bad listen value says which
// setting and what it may be.
func TestParseConfig_VMListenAndImageCache(t *testing.T) {
	tests := []struct {
		args             []string
		listen, cache    string
		wantListen, want string
		bad              bool
	}{
		{nil, "", "", "unix", "", false},
		{nil, "tcp", "/srv/vm-cache", "tcp", "/srv/vm-cache", false},
		{[]string{"--vm-listen=unix", "--vm-image-cache=/x"}, "tcp", "/srv/vm-cache", "unix", "/x", false},
		{nil, "udp", "", "", "", true},
	}
	for _, tt := range tests {
		env := map[string]string{"CORRAL_VDI_BACKEND": "local", "HOME": t.TempDir(),
			"CORRAL_VDI_VM_LISTEN": tt.listen, "CORRAL_VDI_VM_IMAGE_CACHE": tt.cache}
		c, err := ParseConfig(tt.args, func(k string) string { return env[k] })
		if tt.bad {
			if err == nil || !strings.Contains(err.Error(), "CORRAL_VDI_VM_LISTEN") {
				t.Errorf("ParseConfig(%q, listen %q) = %v; want an error naming CORRAL_VDI_VM_LISTEN", tt.args, tt.listen, err)
			}
			continue
		}
		if err != nil || c.Local.VMListen != tt.wantListen || c.Local.VMImageCache != tt.want {
			t.Errorf("ParseConfig(%q, listen %q, cache %q) = %q, %q, %v; want %q, %q", tt.args, tt.listen, tt.cache, c.Local.VMListen, c.Local.VMImageCache, err, tt.wantListen, tt.want)
		}
	}
}
