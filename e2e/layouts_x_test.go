package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"
)

// xLayouts is every layout of static/app/layouts.js (German again after
// TestRDP_IronRDPDrawsTheDesktop's line of it), the setxkbmap arguments
// that make an X desktop's layout that one, and every character below
// U+0100 (and €) the page's table types with it: its keys with Shift and
// AltGr, and its dead keys with a letter or Space. The characters the
// table leaves out, though X types them, are refused: keys that type
// otherwise on Windows (Swiss AltGr+1: ¦ there, | on X; French AltGr+2 and
// +7: dead keys there).
var xLayouts = []struct{ id, name, setxkbmap, chars, refused string }{
	{"de", "German", "de", "!\"#$%&'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqrstuvwxyz{|}~§°²³µÀÁÂÄÈÉÊÌÍÎÒÓÔÖÙÚÛÜÝßàáâäèéêìíîòóôöùúûüý€", ""},
	{"ch", "German (Switzerland)", "ch", "!\"#$%&'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqrstuvwxyz{|}~¢£§¬°ÀÁÂÃÄÈÉÊËÌÍÎÏÑÒÓÔÕÖÙÚÛÜÝàáâãäçèéêëìíîïñòóôõöùúûüýÿ€", "¦"},
	{"fr", "French", "fr", "!\"#$%&'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_abcdefghijklmnopqrstuvwxyz{|}£§°²µÂÄÊËÎÏÔÖÛÜàâäçèéêëîïôöùûüÿ€", "~`"},
	{"es", "Spanish", "es", "!\"#$%&'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqrstuvwxyz{|}¡ª¬·º¿ÀÁÂÄÇÈÉÊËÌÍÎÏÑÒÓÔÖÙÚÛÜÝàáâäçèéêëìíîïñòóôöùúûüýÿ€", ""},
	{"se", "Swedish / Finnish", "se", "!\"#$%&'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqrstuvwxyz{|}~£¤§µ½ÀÁÂÃÄÅÈÉÊËÌÍÎÏÑÒÓÔÕÖÙÚÛÜÝàáâãäåèéêëìíîïñòóôõöùúûüýÿ€", ""},
	{"gb", "English (UK)", "gb", "!\"#$%&'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqrstuvwxyz{|}~£¬€", ""},
	{"us-intl", "English (US, international)", "-layout us -variant intl", "!\"#$%&'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqrstuvwxyz{|}~ÀÁÂÃÄÈÉÊËÌÍÎÏÑÒÓÔÕÖÙÚÛÜÝàáâãäèéêëìíîïñòóôõöùúûüýÿ", ""},
	{"us", "English (US)", "us", "!\"#$%&'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqrstuvwxyz{|}~", ""},
}

// typeXLayouts types each of xLayouts into the desktop's terminal with
// Type as keys, the desktop made that layout by setxkbmap (typed with the
// layout before it, German first) and the layout chosen in the Keys list,
// and reads the line back from the file the shell wrote, byte for byte.
func typeXLayouts(t *testing.T, page playwright.Page, home string) {
	for _, l := range xLayouts {
		t.Run("X-"+l.id, func(t *testing.T) {
			set := filepath.Join(home, "rdp-set-"+l.id)
			pasteAsKeys(t, page, "setxkbmap "+l.setxkbmap+" && touch $HOME/rdp-set-"+l.id+"\n")
			if !eventually(10*time.Second, func() bool { _, err := os.Stat(set); return err == nil }) {
				t.Fatalf("setxkbmap %s did not run in the desktop", l.setxkbmap)
			}
			chooseLayout(t, page, l.id)
			if l.refused != "" {
				var want []string
				for _, r := range l.refused {
					want = append(want, fmt.Sprintf(`"%c" (U+%04X)`, r, r))
				}
				refusedAsKeys(t, page, l.refused, "this desktop's "+l.name+" layout", strings.Join(want, ", "))
			}
			line := l.chars + "\n"
			pasteAsKeys(t, page, "head -n1 > $HOME/rdp-"+l.id+".txt\n"+line)
			waitFile(t, filepath.Join(home, "rdp-"+l.id+".txt"), line)
		})
	}
}

// chooseLayout picks the desktop's layout (an id of static/app/layouts.js)
// in the Keys list, which Type as keys then types with.
func chooseLayout(t *testing.T, page playwright.Page, id string) {
	t.Helper()
	openControl(t, page, "keys-menu")
	_, err := page.GetByTestId("keys-layout-select").SelectOption(playwright.SelectOptionValues{Values: &[]string{id}})
	must(t, err)
	must(t, page.GetByTestId("keys-menu").Click())
}
