package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// TestCLI_PoolPolicy sets every kind of policy field from the command
// line, at pool create and later with pool update, which changes only the
// fields given (the API's PATCH replaces the whole policy).
func TestCLI_PoolPolicy(t *testing.T) {
	p := MustStartPortal(t, "CORRAL_VDI_DEMO_POOL_SIZE=0", "CORRAL_VDI_ADMINS=ops")
	p.mustCLI(t, "pool", "create", "exam", "--from", "session", "--size", "1",
		"-record", "-own-recordings", "-network", "none", "-files", "upload", "-watch", "consent", "-audio=false")
	got := poolPolicy(t, p, "exam")
	if !got.Record || !got.OwnRecordings || got.Network != vdi.NetworkNone || got.FileTransfer.String() != "upload only" ||
		got.Watch != vdi.WatchConsent || got.Audio.On() {
		t.Fatalf("pool create made policy %+v", got)
	}

	out := p.mustCLI(t, "pool", "update", "local/exam", "-idle-timeout", "1h", "-clipboard", "off")
	if !strings.Contains(out, "policy saved") {
		t.Errorf("pool update printed %q", out)
	}
	got = poolPolicy(t, p, "exam")
	if got.IdleTimeout != time.Hour || got.Clipboard != vdi.ClipboardOff {
		t.Errorf("pool update did not set idle 1h and clipboard off: %+v", got)
	}
	if !got.Record || !got.OwnRecordings || got.Network != vdi.NetworkNone || got.FileTransfer.String() != "upload only" ||
		got.Watch != vdi.WatchConsent || got.Audio.On() {
		t.Errorf("pool update lost fields it was not given: %+v", got)
	}
	if !auditHas(t, p, "", "pool-policy", "exam", "clipboard off", "network none") {
		t.Error("the audit log has no pool-policy row for the update")
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"pool", "update", "local/exam", "-files", "sideways"}, "want both, upload, download or off"},
		{[]string{"pool", "update", "local/exam"}, "say what to change"},
		{[]string{"pool", "update", "local/exam", "-watch", "always"}, "notify, consent or off"},
	} {
		if _, errOut, code := p.cli(t, tc.args...); code == 0 || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, %q; want an error saying %q", tc.args, code, errOut, tc.want)
		}
	}
	if got := poolPolicy(t, p, "exam"); got.Watch != vdi.WatchConsent || got.Network != vdi.NetworkNone {
		t.Errorf("a refused update changed the policy: %+v", got)
	}
}
