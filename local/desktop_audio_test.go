package local

import (
	"strings"
	"testing"
)

// TestLookAudio_Missing: a host without the sound packages names the one
// to install (the desktop then starts without sound).
func TestLookAudio_Missing(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := lookAudio()
	if err == nil || !strings.Contains(err.Error(), "install the Debian package pulseaudio") {
		t.Errorf("lookAudio with nothing on PATH = %v; want the package to install", err)
	}
}
