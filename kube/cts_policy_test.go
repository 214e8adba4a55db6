package kube

import (
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

func TestParsePolicy_Console(t *testing.T) {
	p := vdi.Policy{DisconnectGrace: time.Minute, Clipboard: vdi.ClipboardToDesktop, FileTransfer: vdi.ToggleOff}
	got, err := parsePolicy(formatPolicy(p))
	if err != nil || got.Console() != p.Console() || got.DisconnectGrace != time.Minute {
		t.Errorf("parsePolicy(formatPolicy(%+v)) = %+v, %v; want it back", p, got, err)
	}
	if s := formatPolicy(vdi.Policy{}); s != "{}" {
		t.Errorf("formatPolicy of the defaults = %s; want {}", s)
	}
	if _, err := parsePolicy(`{"clipboard":"sideways"}`); err == nil {
		t.Error("clipboard sideways accepted; want an error")
	}
}
