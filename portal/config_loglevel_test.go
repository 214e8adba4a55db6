package portal

import (
	"log/slog"
	"strings"
	"testing"
)

// TestParseConfig_LogLevel: the log level is info by default, debug (which
// logs every claim's steps) when asked, and a word it does not know is
// refused, saying which are.
func TestParseConfig_LogLevel(t *testing.T) {
	tests := []struct {
		env     string
		want    slog.Level
		wantErr string
	}{
		{"", slog.LevelInfo, ""},
		{"debug", slog.LevelDebug, ""},
		{"warn", slog.LevelWarn, ""},
		{"error", slog.LevelError, ""},
		{"verbose", 0, `"verbose" is not debug, info, warn or error`},
		{"DEBUG+2", 0, "is not debug, info, warn or error"},
	}
	for _, tt := range tests {
		env := map[string]string{"CORRAL_VDI_BACKEND": "local", "HOME": t.TempDir(), "CORRAL_VDI_LOG_LEVEL": tt.env}
		c, err := ParseConfig(nil, func(k string) string { return env[k] })
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "LOG_LEVEL") {
				t.Errorf("CORRAL_VDI_LOG_LEVEL=%q: err %v; want one naming the setting and saying %q", tt.env, err, tt.wantErr)
			}
			continue
		}
		if err != nil || c.Server.LogLevel != tt.want {
			t.Errorf("CORRAL_VDI_LOG_LEVEL=%q: LogLevel = %v, %v; want %v", tt.env, c.Server.LogLevel, err, tt.want)
		}
	}
}
