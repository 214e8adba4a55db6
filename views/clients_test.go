package views

import (
	"testing"

	"github.com/corral-dev/corral-vdi-portal/vdi"
)

// hashedPage is a Page whose assets are all embedded (at a hashed URL).
func hashedPage() Page {
	return Page{Title: "t", Asset: func(p string) string { return "/static/h/" + p }}
}

// TestHome_PrefetchesTheRDPClient: the home page fetches the RDP client
// (its wasm first) into the browser's cache when a claim may open an RDP
// console, and not when every pool it lists records its sessions (no RDP)
// or the client is not embedded.
func TestHome_PrefetchesTheRDPClient(t *testing.T) {
	plain := PoolRow{PoolStatus: vdi.PoolStatus{Pool: vdi.Pool{Name: "p", Size: 2}, Free: 1}}
	recorded := plain
	recorded.Policy.Record = true
	for _, tc := range []struct {
		name  string
		page  Page
		pools []PoolRow
		want  bool
	}{
		{"PlainPool", hashedPage(), []PoolRow{plain}, true},
		{"RecordedPool", hashedPage(), []PoolRow{recorded}, false},
		{"NoPools", hashedPage(), nil, false},
		{"NotEmbedded", Page{Title: "t", Asset: func(p string) string { return "/static/" + p }}, []PoolRow{plain}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := mustParse(t, render(t, Home(HomeProps{Page: tc.page, Pools: tc.pools})))
			got := len(findAll(doc, hasAttrs("rel", "prefetch", "href", "/static/h/ironrdp/ironrdp.wasm"))) > 0
			if got != tc.want {
				t.Errorf("home page prefetches the RDP wasm = %v; want %v", got, tc.want)
			}
		})
	}
}

// TestHome_PrefetchesTheRDPModuleChunks: with the RDP console's module
// the home page prefetches what it imports (the bundle's shared chunks),
// each once, so the console finds all of it in the browser's cache.
func TestHome_PrefetchesTheRDPModuleChunks(t *testing.T) {
	page := hashedPage()
	page.Modules = func(p string) []string {
		if p == "bundle/console-rdp.js" {
			return []string{page.Asset(p), "/static/h/bundle/chunk-A.js", "/static/h/bundle/console-early.js"}
		}
		return []string{page.Asset(p)}
	}
	plain := PoolRow{PoolStatus: vdi.PoolStatus{Pool: vdi.Pool{Name: "p", Size: 2}, Free: 1}}
	doc := mustParse(t, render(t, Home(HomeProps{Page: page, Pools: []PoolRow{plain}})))
	for _, want := range []string{"/static/h/bundle/console-rdp.js", "/static/h/bundle/chunk-A.js", "/static/h/bundle/console-early.js"} {
		if n := len(findAll(doc, hasAttrs("rel", "prefetch", "href", want))); n != 1 {
			t.Errorf("home page prefetches %s %d times; want once", want, n)
		}
	}
}

// TestConsole_PreloadsTheLikelyConsole: the console page modulepreloads
// the client of the console it will most likely open, and says which.
func TestConsole_PreloadsTheLikelyConsole(t *testing.T) {
	for likely, want := range map[string]string{"rdp": "ironrdp/iron-remote-desktop-rdp.js", "vnc": "novnc/rfb.js"} {
		doc := mustParse(t, render(t, Console(ConsoleProps{Page: hashedPage(), Likely: likely})))
		if len(findAll(doc, hasAttrs("rel", "modulepreload", "href", "/static/h/"+want))) == 0 || len(findAll(doc, hasAttrs("data-likely", likely))) == 0 {
			t.Errorf("console page for likely %s: no modulepreload of %s or no data-likely", likely, want)
		}
	}
}

// TestConsole_EarlyVNCSocket: the console page names the VNC websocket
// for console-early.js to open as the page starts only when the page will
// most likely open VNC on a running desktop; otherwise a socket opened
// ahead would be one the page never uses.
func TestConsole_EarlyVNCSocket(t *testing.T) {
	running := vdi.Desktop{Member: vdi.Member{Namespace: "local", Name: "m-1", Power: vdi.PowerRunning}}
	stopped := running
	stopped.Power = vdi.PowerStopped
	for _, tc := range []struct {
		name   string
		d      vdi.Desktop
		likely string
		want   bool
	}{
		{"VNC", running, "vnc", true},
		{"RDP", running, "rdp", false},
		{"Terminal", running, "terminal", false},
		{"Stopped", stopped, "vnc", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := mustParse(t, render(t, Console(ConsoleProps{Page: hashedPage(), Desktop: tc.d, Likely: tc.likely})))
			meta := len(findAll(doc, hasAttrs("name", "corral-early-console", "content", "/ws/vnc/local/m-1"))) > 0
			script := len(findAll(doc, hasAttrs("src", "/static/h/bundle/console-early.js", "async", ""))) > 0
			if meta != tc.want || script != tc.want {
				t.Errorf("likely %s, %s: early socket meta %v, async script %v; want %v", tc.likely, tc.d.Power, meta, script, tc.want)
			}
		})
	}
}

// TestKiosk_EarlyVNCSocket: the kiosk opens its VNC websocket early as
// the console page does, and only for VNC.
func TestKiosk_EarlyVNCSocket(t *testing.T) {
	for likely, want := range map[string]bool{"vnc": true, "rdp": false, "terminal": false} {
		doc := mustParse(t, render(t, Kiosk(KioskProps{Page: hashedPage(), Pool: "p", Desktop: "local/m-1", Likely: likely})))
		if got := len(findAll(doc, hasAttrs("name", "corral-early-console", "content", "/ws/vnc/local/m-1"))) > 0; got != want {
			t.Errorf("kiosk for likely %s: early socket meta %v; want %v", likely, got, want)
		}
	}
}
