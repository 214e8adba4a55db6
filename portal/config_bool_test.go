package portal

import "testing"

// TestParseConfig_StopDesktopsOnExit: the flag works bare, as a boolean
// flag does, and with a value; a bad value says which setting.
func TestParseConfig_StopDesktopsOnExit(t *testing.T) {
	tests := []struct {
		args []string
		env  string
		want bool
		bad  bool
	}{
		{nil, "", false, false},
		{[]string{"--stop-desktops-on-exit"}, "", true, false},
		{[]string{"--stop-desktops-on-exit=false"}, "true", false, false},
		{nil, "true", true, false},
		{[]string{"--stop-desktops-on-exit=maybe"}, "", false, true},
	}
	for _, tt := range tests {
		env := map[string]string{"CORRAL_VDI_BACKEND": "local", "HOME": t.TempDir(), "CORRAL_VDI_STOP_DESKTOPS_ON_EXIT": tt.env}
		c, err := ParseConfig(tt.args, func(k string) string { return env[k] })
		if tt.bad {
			if err == nil {
				t.Errorf("ParseConfig(%q) = nil error; want one", tt.args)
			}
			continue
		}
		if err != nil || c.Local.StopDesktopsOnExit != tt.want {
			t.Errorf("ParseConfig(%q, env %q): StopDesktopsOnExit = %v, %v; want %v", tt.args, tt.env, c.Local.StopDesktopsOnExit, err, tt.want)
		}
	}
}
