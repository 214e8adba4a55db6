package relay

import "testing"

func TestParseResize(t *testing.T) {
	tests := []struct {
		in   string
		want Resize
		ok   bool
	}{
		{`{"type":"resize","cols":120,"rows":40}`, Resize{120, 40}, true},
		{` {"type":"resize","cols":120,"rows":40}`, Resize{}, false}, // must start with {
		{`{"type":"resize","cols":0,"rows":40}`, Resize{}, false},
		{`{"type":"resize","cols":80,"rows":1001}`, Resize{}, false},
		{`{"type":"resize","cols":-1,"rows":40}`, Resize{}, false},
		{`{"type":"other","cols":80,"rows":24}`, Resize{}, false},
		{`{"cols":80,"rows":24}`, Resize{}, false},
		{`{`, Resize{}, false},
		{`ls -l`, Resize{}, false},
		{"\r", Resize{}, false},
	}
	for _, tt := range tests {
		got, ok := ParseResize([]byte(tt.in))
		if ok != tt.ok || got != tt.want {
			t.Errorf("ParseResize(%q) = %v, %v; want %v, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
	if got, ok := ParseResize(ResizeMessage(Resize{100, 30})); !ok || got != (Resize{100, 30}) {
		t.Errorf("ParseResize(ResizeMessage(100x30)) = %v, %v; want it back", got, ok)
	}
}
