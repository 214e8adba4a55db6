package handlers

import (
	"os"
	"regexp"
	"slices"
	"testing"
)

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

// TestKeyboardLayouts_AsThePageHasThem checks that the layouts the portal
// keeps are the ones static/app/layouts.js types with: one the page lacks
// would be kept and never used, one the portal lacks refused.
func TestKeyboardLayouts_AsThePageHasThem(t *testing.T) {
	js, err := os.ReadFile("../static/app/layouts.js")
	if err != nil {
		t.Fatal(err)
	}
	table := regexp.MustCompile(`(?s)\nconst tables = \{\n(.*?)\n\};`).FindSubmatch(js)
	if table == nil {
		t.Fatal("layouts.js has no tables")
	}
	var ids []string
	for _, m := range regexp.MustCompile(`(?m)^  '?([a-z-]+)'?: \{`).FindAllSubmatch(table[1], -1) {
		ids = append(ids, string(m[1]))
	}
	if !slices.Equal(ids, keyboardLayouts) {
		t.Errorf("layouts.js has %q; the portal keeps %q", ids, keyboardLayouts)
	}
}
