package vdi_test

import (
	"encoding/json"
	"testing"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

func TestClipboard(t *testing.T) {
	for _, tc := range []struct {
		c               vdi.Clipboard
		valid, to, from bool
	}{
		{"", true, true, true},
		{vdi.ClipboardBoth, true, true, true},
		{vdi.ClipboardToDesktop, true, true, false},
		{vdi.ClipboardFromDesktop, true, false, true},
		{vdi.ClipboardOff, true, false, false},
		{"sideways", false, false, false}, // unknown: nothing flows
	} {
		if got := [3]bool{tc.c.Valid(), tc.c.ToDesktop(), tc.c.FromDesktop()}; got != [3]bool{tc.valid, tc.to, tc.from} {
			t.Errorf("%q: valid, to, from = %v; want %v", tc.c, got, [3]bool{tc.valid, tc.to, tc.from})
		}
	}
}

func TestPolicy_ConsoleJSON(t *testing.T) {
	for _, tc := range []struct {
		in, out string
		want    vdi.ConsolePolicy
	}{
		{`{}`, `{}`, vdi.ConsolePolicy{Clipboard: vdi.ClipboardBoth, FileTransfer: true, Upload: true, Download: true, Audio: true, Watch: vdi.WatchNotify}},
		{`{"clipboard":"off","fileTransfer":false,"audio":false}`, `{"clipboard":"off","fileTransfer":false,"audio":false}`, vdi.ConsolePolicy{Clipboard: vdi.ClipboardOff, Watch: vdi.WatchNotify}},
		{`{"fileTransfer":true}`, `{"fileTransfer":true}`, vdi.ConsolePolicy{Clipboard: vdi.ClipboardBoth, FileTransfer: true, Upload: true, Download: true, Audio: true, Watch: vdi.WatchNotify}},
		// One way only: an object; both ways the same: the plain boolean.
		{`{"fileTransfer":{"upload":false}}`, `{"fileTransfer":{"upload":false,"download":true}}`, vdi.ConsolePolicy{Clipboard: vdi.ClipboardBoth, FileTransfer: true, Download: true, Audio: true, Watch: vdi.WatchNotify}},
		{`{"fileTransfer":{"upload":false,"download":false}}`, `{"fileTransfer":false}`, vdi.ConsolePolicy{Clipboard: vdi.ClipboardBoth, Audio: true, Watch: vdi.WatchNotify}},
		{`{"watch":"consent"}`, `{"watch":"consent"}`, vdi.ConsolePolicy{Clipboard: vdi.ClipboardBoth, FileTransfer: true, Upload: true, Download: true, Audio: true, Watch: vdi.WatchConsent}},
	} {
		var p vdi.Policy
		if err := json.Unmarshal([]byte(tc.in), &p); err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		if got := p.Console(); got != tc.want {
			t.Errorf("%s: Console() = %+v; want %+v", tc.in, got, tc.want)
		}
		if b, _ := json.Marshal(p); string(b) != tc.out {
			t.Errorf("%s: marshals as %s; want %s", tc.in, b, tc.out)
		}
	}
	var p vdi.Policy
	if err := json.Unmarshal([]byte(`{"fileTransfer":{"uplaod":true}}`), &p); err == nil {
		t.Error(`fileTransfer {"uplaod"} accepted; want an error`)
	}
	if err := json.Unmarshal([]byte(`{"fileTransfer":"yes"}`), &p); err == nil {
		t.Error(`fileTransfer "yes" accepted; want an error`)
	}
}
