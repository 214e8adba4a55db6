package e2e

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fileAttacks are the attack rows of the Files panel: only the holder
// moves files, only as the pool allows, only from the portal's own pages,
// never through a name or link the desktop (or the client) chose.
func fileAttacks() []attack {
	filesOf := func(member string) string { return "/api/vdi/desktops/local/" + member + "/files" }
	return []attack{
		{
			name: "FileUploadIntoAnotherUsersDesktop",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "PUT", filesOf(a.victim)+"/evil.sh", "echo owned", "Tailscale-User-Login", "mallory", "Content-Type", "application/octet-stream")
			},
			status: 403, says: "not yours",
		},
		{
			name: "FileDownloadByAnAdmin",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "GET", filesOf(a.victim), "", "Tailscale-User-Login", admin)
			},
			status: 403, says: "holder",
		},
		{
			name: "FileUploadFromACrossSitePage",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "PUT", filesOf(a.victim)+"/evil.sh", "echo owned", "Tailscale-User-Login", "alice",
					"Origin", "http://evil.example", "Sec-Fetch-Site", "cross-site", "Content-Type", "application/octet-stream")
			},
			status: 403,
		},
		{
			// The name is the client's: only its last part is used, in
			// ~/Uploads, never a path out of it.
			name: "FileUploadWithDotDotInTheName",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "PUT", filesOf(a.victim)+"/..%2F..%2F..%2Fcorral-dotdot", "x", "Tailscale-User-Login", "alice", "Content-Type", "application/octet-stream")
			},
			status: 201, says: `"name":"corral-dotdot"`,
			changes: []string{"file-upload"},
			after: func(t *testing.T, a *arena, _ *http.Response, _ string) {
				home := a.p.homeOf(a.victim)
				if _, err := os.Stat(filepath.Join(home, "Uploads", "corral-dotdot")); err != nil {
					t.Errorf("the upload is not in ~/Uploads: %v", err)
				}
				for _, outside := range []string{filepath.Join(home, "corral-dotdot"), filepath.Join(filepath.Dir(home), "corral-dotdot"), filepath.Join(a.p.DataDir, "local", "corral-dotdot")} {
					if _, err := os.Lstat(outside); err == nil {
						t.Errorf("the upload escaped to %s", outside)
					}
				}
			},
		},
		{
			// The desktop plants a link to the portal's cookie keys in
			// ~/Downloads: it is neither listed nor served.
			name: "FileDownloadOfASymlinkToThePortalsKeys",
			setup: func(t *testing.T, a *arena) {
				plantAsMember(t, a, "keys", func(path string) error { return os.Symlink(filepath.Join(a.p.DataDir, "cookie.keys"), path) })
			},
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "GET", filesOf(a.victim)+"/keys", "", "Tailscale-User-Login", "alice")
			},
			status: 403, says: "link",
			after: func(t *testing.T, a *arena, _ *http.Response, _ string) {
				var list []struct{ Name string }
				a.p.API(t, "alice", "GET", filesOf(a.victim), &list)
				for _, f := range list {
					if f.Name == "keys" {
						t.Error("the planted link is listed")
					}
				}
			},
		},
		{
			name: "FileUploadOverTheLimit",
			env:  []string{"CORRAL_VDI_UPLOAD_MAX=1KiB"},
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "PUT", filesOf(a.victim)+"/big.bin", strings.Repeat("x", 4096), "Tailscale-User-Login", "alice", "Content-Type", "application/octet-stream")
			},
			status: 413, says: "larger than",
		},
		{
			name: "FileUploadOnAPoolThatForbidsIt",
			setup: func(t *testing.T, a *arena) {
				if code := a.p.APIBody(t, admin, "POST", "/api/vdi/pools", `{"name":"noup","kind":"ct","mode":"ephemeral","size":1,"policy":{"fileTransfer":{"upload":false,"download":true}}}`, nil); code != 201 && code != 200 {
					t.Fatalf("ops creates pool noup: %d", code)
				}
				var d desktop
				if code := a.p.API(t, "alice", "POST", "/api/vdi/pools/local/noup/claim", &d); code != 200 {
					t.Fatalf("alice claims from noup: %d", code)
				}
				a.state["noup"] = d.Name
			},
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "PUT", filesOf(a.state["noup"].(string))+"/in.txt", "x", "Tailscale-User-Login", "alice", "Content-Type", "application/octet-stream")
			},
			status: 403, says: "does not allow uploads",
		},
		// Sound: whoever may open the console, where the pool allows it,
		// from the portal's own pages, a few listeners per desktop.
		{
			name: "AudioOfAnotherUsersDesktop",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.dialWS(t, "/ws/audio/local/"+a.victim, "Tailscale-User-Login", "mallory", "Origin", "http://"+a.host)
			},
			status: 403, says: "not yours",
		},
		{
			name: "AudioFromACrossSitePage",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.dialWS(t, "/ws/audio/local/"+a.victim, "Tailscale-User-Login", "alice", "Origin", "http://evil.example")
			},
			status: 403, says: "origin",
		},
		{
			name: "AudioOnAPoolThatForbidsIt",
			setup: func(t *testing.T, a *arena) {
				if code := a.p.APIBody(t, admin, "POST", "/api/vdi/pools", `{"name":"mute","kind":"ct","mode":"ephemeral","size":1,"policy":{"audio":false}}`, nil); code != 201 {
					t.Fatalf("ops creates pool mute: %d", code)
				}
				var d desktop
				if code := a.p.API(t, "alice", "POST", "/api/vdi/pools/local/mute/claim", &d); code != 200 {
					t.Fatalf("alice claims from mute: %d", code)
				}
				a.state["mute"] = d.Name
			},
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.dialWS(t, "/ws/audio/local/"+a.state["mute"].(string), "Tailscale-User-Login", "alice", "Origin", "http://"+a.host)
			},
			status: 403, says: "does not allow sound",
		},
		{
			// A bidi override in an upload's name would make
			// "invoice\u202efdp.exe" read as "invoiceexe.pdf" in the
			// desktop's file manager: format characters are mapped.
			name: "UploadNameSpoofsItsExtension",
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.do(t, "PUT", filesOf(a.victim)+"/invoice%E2%80%AEfdp.exe", "MZ", "Tailscale-User-Login", "alice", "Content-Type", "application/octet-stream")
			},
			status: 201, says: `"invoice_fdp.exe"`, changes: []string{"file-upload"},
		},
		// Sound follows the console's watching decision: an admin beside
		// the holder hears nothing the pool's watch policy would not let
		// them see.
		{
			name: "AudioOfAnAdminUnderWatchOff",
			setup: func(t *testing.T, a *arena) {
				a.state["hush"] = poolClaimedBy(t, a, "hush", `{"watch":"off"}`, "alice")
			},
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.dialWS(t, "/ws/audio/local/"+a.state["hush"].(string), "Tailscale-User-Login", admin, "Origin", "http://"+a.host)
			},
			status: 403, says: "keeps watchers off",
		},
		{
			name: "AudioOfAnAdminBeforeConsent",
			setup: func(t *testing.T, a *arena) {
				a.state["ask"] = poolClaimedBy(t, a, "ask", `{"watch":"consent"}`, "alice")
			},
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.dialWS(t, "/ws/audio/local/"+a.state["ask"].(string), "Tailscale-User-Login", admin, "Origin", "http://"+a.host)
			},
			status: 403, says: "asks alice",
		},
		{
			// Each listener runs an encoder in the desktop: a fifth is
			// refused while four play.
			name: "AudioListenersFlood",
			setup: func(t *testing.T, a *arena) {
				waitFor(t, 15*time.Second, "the victim's sound server", func() bool {
					return a.p.API(t, "alice", "GET", "/api/vdi/desktops/local/"+a.victim, nil) == 200 && soundUp(a)
				})
				for range 4 {
					if res := a.dialWS(t, "/ws/audio/local/"+a.victim, "Tailscale-User-Login", "alice", "Origin", "http://"+a.host); res.StatusCode != 101 {
						t.Fatalf("listener: %d", res.StatusCode)
					}
				}
			},
			attack: func(t *testing.T, a *arena) *http.Response {
				return a.dialWS(t, "/ws/audio/local/"+a.victim, "Tailscale-User-Login", "alice", "Origin", "http://"+a.host)
			},
			status: 429, says: "several tabs",
		},
	}
}

// poolClaimedBy makes a CT pool name with policy (JSON) as the admin, and
// returns the member user claims from it.
func poolClaimedBy(t *testing.T, a *arena, name, policy, user string) string {
	t.Helper()
	body := `{"name":"` + name + `","kind":"ct","mode":"ephemeral","size":1,"policy":` + policy + `}`
	if code := a.p.APIBody(t, admin, "POST", "/api/vdi/pools", body, nil); code != 201 {
		t.Fatalf("%s creates pool %s: %d", admin, name, code)
	}
	var d desktop
	if code := a.p.API(t, user, "POST", "/api/vdi/pools/local/"+name+"/claim", &d); code != 200 {
		t.Fatalf("%s claims from %s: %d", user, name, code)
	}
	return d.Name
}

// soundUp reports whether the victim's console page offers sound: its
// desktop's sound server runs.
func soundUp(a *arena) bool {
	req, _ := http.NewRequest("GET", a.p.URL+"/desktops/local/"+a.victim, nil)
	req.Header.Set("Tailscale-User-Login", "alice")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return strings.Contains(string(b), `data-testid="audio-toggle"`)
}

// plantAsMember makes name in the victim's ~/Downloads with plant, owned
// by the desktop's uid as if its user had made it.
func plantAsMember(t *testing.T, a *arena, name string, plant func(path string) error) {
	t.Helper()
	home := a.p.homeOf(a.victim)
	waitFor(t, 15*time.Second, "the victim's home", func() bool { _, err := os.Stat(home); return err == nil })
	uid := os.Getuid()
	if b, err := os.ReadFile(filepath.Join(filepath.Dir(home), "uid")); err == nil {
		uid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	dir := filepath.Join(home, "Downloads")
	os.Mkdir(dir, 0o755)
	os.Lchown(dir, uid, uid)
	path := filepath.Join(dir, name)
	os.Remove(path)
	if err := plant(path); err != nil {
		t.Fatal(err)
	}
	os.Lchown(path, uid, uid)
}
