package handlers

import "testing"

func TestValidSize(t *testing.T) {
	for v, want := range map[string]bool{
		"fit": true, "actual": true, "1600x900": true, "65535x65535": true, "1x1": true,
		"": false, "65536x900": false, "0x900": false, "01600x900": false, "1600X900": false, "fit ": false,
		"1600x": false, "x900": false, "screens": false, `"><script>`: false, "1600x900x2": false,
	} {
		if got := validSize(v); got != want {
			t.Errorf("validSize(%q) = %v; want %v", v, got, want)
		}
	}
}
