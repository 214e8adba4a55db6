package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"strings"
	"testing"

	"github.com/mxschmitt/playwright-go"

	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
)

// TestFiles_Console drives the console's Files panel as a user would: a
// file dropped on the console lands in ~/Uploads with the same bytes (read
// back in the desktop's terminal), and a file the desktop writes to
// ~/Downloads downloads with the same bytes. Both are in the audit log.
func TestFiles_Console(t *testing.T) {
	p := MustStartPortal(t, "CORRAL_VDI_DEMO_POOL_SIZE=1", "CORRAL_VDI_ADMINS=boss")
	b := MustLaunchBrowser(t)
	expect := playwright.NewPlaywrightAssertions(testwait.MS(15000))
	d := mustClaim(t, p, "alice", "demo")
	page := b.MustNewPage(t, 1280, 800)
	signIn(t, page, p, "alice", "/desktops/local/"+d.Name+"?protocol=vnc")
	must(t, expect.Locator(page.GetByTestId("status")).ToHaveText("Connected"))
	shell := openGuestShell(t, p, "alice", d.Name)

	t.Run("a file dropped on the console lands in ~/Uploads", func(t *testing.T) {
		text := "notes from my laptop: ünïcode ✓\n"
		sum := sha256.Sum256([]byte(text))
		// What a drag from the file manager gives the page: a drop event
		// carrying a File.
		_, err := page.Evaluate(`(text) => {
			const dt = new DataTransfer();
			dt.items.add(new File([text], 'notes.txt', { type: 'text/plain' }));
			const screen = document.getElementById('screen');
			screen.dispatchEvent(new DragEvent('dragenter', { dataTransfer: dt, bubbles: true }));
			screen.dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
		}`, text)
		must(t, err)
		must(t, expect.Locator(page.GetByTestId("files-note")).ToContainText("Uploaded notes.txt"))
		screenshot(t, page, "files-uploaded")
		out := shell.run("sha256sum ~/Uploads/notes.txt")
		if !strings.Contains(out, hex.EncodeToString(sum[:])) {
			t.Errorf("in the desktop: %q; want sha256 %x", out, sum)
		}
	})

	t.Run("a file the desktop saved to ~/Downloads downloads", func(t *testing.T) {
		out := shell.run("mkdir -p ~/Downloads && head -c 300000 /dev/urandom > ~/Downloads/report.bin && sha256sum ~/Downloads/report.bin")
		i := strings.LastIndex(out, "  ")
		if i < 64 {
			t.Fatalf("sha256sum printed %q", out)
		}
		want := strings.TrimSpace(out[i-64 : i])
		must(t, page.GetByTestId("files-refresh").Click())
		link := page.GetByTestId("files-download").Filter(playwright.LocatorFilterOptions{HasText: "report.bin"})
		must(t, expect.Locator(link).ToBeVisible())
		docShot(t, page, "console-files")
		dl, err := page.ExpectDownload(func() error { return link.Click() })
		must(t, err)
		path, err := dl.Path()
		must(t, err)
		data, err := os.ReadFile(path)
		must(t, err)
		sum := sha256.Sum256(data)
		if got := hex.EncodeToString(sum[:]); got != want {
			t.Errorf("downloaded %d bytes with sha256 %s; want %s", len(data), got, want)
		}
	})

	t.Run("every transfer is in the audit log", func(t *testing.T) {
		var audit []struct {
			Action string `json:"action"`
			Actor  string `json:"actor"`
			Detail string `json:"detail"`
		}
		p.API(t, "boss", "GET", "/api/vdi/history/audit?limit=1000", &audit)
		seen := map[string]string{}
		for _, e := range audit {
			if e.Actor == "alice" {
				seen[e.Action] = e.Detail
			}
		}
		if !strings.Contains(seen["file-upload"], "notes.txt") || !strings.Contains(seen["file-download"], "report.bin") {
			t.Errorf("alice's audit rows: %v; want file-upload of notes.txt and file-download of report.bin", seen)
		}
	})
}

// TestFiles_PolicyHidesThePanel: a pool that allows no transfer shows no
// Files button; one that allows only downloads shows no upload.
func TestFiles_PolicyHidesThePanel(t *testing.T) {
	p := MustStartPortal(t, "CORRAL_VDI_DEMO_POOL_SIZE=0", "CORRAL_VDI_ADMINS=boss")
	b := MustLaunchBrowser(t)
	expect := playwright.NewPlaywrightAssertions(testwait.MS(15000))
	for _, c := range []struct {
		pool, policy string
		button, pick bool
	}{
		{"nofiles", `{"fileTransfer":false}`, false, false},
		{"downonly", `{"fileTransfer":{"upload":false,"download":true}}`, true, false},
	} {
		t.Run(c.pool, func(t *testing.T) {
			if code := p.APIBody(t, "boss", "POST", "/api/vdi/pools", `{"name":"`+c.pool+`","kind":"ct","mode":"ephemeral","size":1,"policy":`+c.policy+`}`, nil); code != 201 {
				t.Fatalf("create %s: %d", c.pool, code)
			}
			var d desktop
			if code := p.API(t, "alice", "POST", "/api/vdi/pools/local/"+c.pool+"/claim", &d); code != 200 {
				t.Fatalf("claim: %d", code)
			}
			page := b.MustNewPage(t, 1280, 800)
			signIn(t, page, p, "alice", "/desktops/local/"+d.Name)
			must(t, expect.Locator(page.GetByTestId("status")).ToHaveText("Connected"))
			if n, _ := page.GetByTestId("files-toggle").Count(); (n == 1) != c.button {
				t.Errorf("Files button shown: %v; want %v", n == 1, c.button)
			}
			if n, _ := page.GetByTestId("files-pick").Count(); (n == 1) != c.pick {
				t.Errorf("upload picker present: %v; want %v", n == 1, c.pick)
			}
		})
	}
}
