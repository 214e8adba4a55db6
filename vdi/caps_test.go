package vdi

import (
	"slices"
	"testing"
)

func TestMemberRanked(t *testing.T) {
	shadow := map[Protocol]Caps{ProtocolRDP: {Display: true}}
	tests := []struct {
		name string
		m    Member
		want []Protocol
	}{
		{"a Windows VM: RDP first", Member{Protocols: []Protocol{ProtocolVNC, ProtocolSerial, ProtocolRDP}}, []Protocol{ProtocolRDP, ProtocolVNC, ProtocolSerial}},
		{"freerdp-shadow: VNC first", Member{Protocols: []Protocol{ProtocolRDP, ProtocolVNC, ProtocolTerminal}, ConsoleCaps: shadow}, []Protocol{ProtocolVNC, ProtocolRDP, ProtocolTerminal}},
		{"freerdp-shadow alone still beats a terminal", Member{Protocols: []Protocol{ProtocolTerminal, ProtocolRDP}, ConsoleCaps: shadow}, []Protocol{ProtocolRDP, ProtocolTerminal}},
		{"a container: its terminal", Member{Protocols: []Protocol{ProtocolTerminal}}, []Protocol{ProtocolTerminal}},
		{"terminal before serial (it resizes)", Member{Protocols: []Protocol{ProtocolSerial, ProtocolTerminal}}, []Protocol{ProtocolTerminal, ProtocolSerial}},
	}
	for _, tt := range tests {
		if got := tt.m.Ranked(); !slices.Equal(got, tt.want) {
			t.Errorf("%s: Ranked() = %v; want %v", tt.name, got, tt.want)
		}
	}
}
