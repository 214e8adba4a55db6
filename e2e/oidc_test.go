package e2e

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mxschmitt/playwright-go"

	"github.com/corral-dev/corral-vdi-portal/internal/testoidc"
	"github.com/corral-dev/corral-vdi-portal/internal/testwait"
)

const (
	oidcSecret     = "client-secret-that-must-not-be-logged"
	oidcSessionKey = "c2Vzc2lvbi1rZXktdGhhdC1tdXN0LW5vdC1iZS1sb2dnZWQ=" // 33 bytes
)

var (
	opAlice = testoidc.User{ID: "u-alice", Username: "alice", Password: "alice-pw", Email: "alice@example.com",
		Name: "Alice Liddell", Groups: []string{"staff", "vdi-admins"}}
	opBob = testoidc.User{ID: "u-bob", Username: "bob", Password: "bob-pw", Email: "bob@example.com", Name: "Bob Builder", Groups: []string{"staff"}}
)

// freeLoopbackAddr returns a loopback address with a port free right now:
// the OIDC redirect URL must be known before the portal starts.
func freeLoopbackAddr(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// mustStartOIDCPortal starts a real OpenID Provider in this process and the
// portal binary signing users in with it.
func mustStartOIDCPortal(tb testing.TB, modes string, env ...string) (*Portal, *testoidc.OP) {
	tb.Helper()
	addr := freeLoopbackAddr(tb)
	base := "http://" + addr
	op := testoidc.MustStart(tb, testoidc.Config{
		ClientID: "corral-e2e", ClientSecret: oidcSecret,
		RedirectURIs: []string{base + "/auth/oidc/callback"}, PostLogoutRedirectURIs: []string{base + "/signin"},
		Users: []testoidc.User{opAlice, opBob},
	})
	keyFile := filepath.Join(tb.TempDir(), "session.keys")
	if err := os.WriteFile(keyFile, []byte("# newest first\n"+oidcSessionKey+"\n"), 0o600); err != nil {
		tb.Fatal(err)
	}
	env = append([]string{
		"CORRAL_VDI_LISTEN=" + addr,
		"CORRAL_VDI_AUTH=" + modes,
		"CORRAL_VDI_DEMO_POOL_SIZE=1",
		"CORRAL_VDI_OIDC_ISSUER=" + op.Issuer,
		"CORRAL_VDI_OIDC_CLIENT_ID=corral-e2e",
		"CORRAL_VDI_OIDC_CLIENT_SECRET=" + oidcSecret,
		"CORRAL_VDI_OIDC_REDIRECT_URL=" + base + "/auth/oidc/callback",
		"CORRAL_VDI_OIDC_ADMIN_GROUPS=vdi-admins",
		"CORRAL_VDI_OIDC_PROVIDER_NAME=Test IdP",
		"CORRAL_VDI_SESSION_KEYS_FILE=" + keyFile,
	}, env...)
	p := MustStartPortal(tb, env...)
	if p.URL != base {
		tb.Fatalf("portal serves on %s; want %s", p.URL, base)
	}
	return p, op
}

// signInWithProvider clicks "Sign in with Test IdP" on the sign-in page and
// types the password at the provider.
func signInWithProvider(t *testing.T, page playwright.Page, u testoidc.User) {
	t.Helper()
	must(t, page.GetByTestId("signin-oidc").Click())
	must(t, page.GetByTestId("op-username").Fill(u.Username))
	must(t, page.GetByTestId("op-password").Fill(u.Password))
	must(t, page.GetByTestId("op-signin").Click())
}

// TestOIDC_BrowserSignInAndOut signs in through a real OpenID Provider in
// Chromium, checks admin rights from the groups claim, replays the
// provider's answer, and signs out at the provider too.
func TestOIDC_BrowserSignInAndOut(t *testing.T) {
	portal, op := mustStartOIDCPortal(t, "tailscale,oidc,dev")
	page := MustLaunchBrowser(t).MustNewPage(t, 1280, 800)
	expect := playwright.NewPlaywrightAssertions(testwait.MS(10000))
	var mu sync.Mutex
	var callbacks []string
	page.OnRequest(func(r playwright.Request) {
		if strings.Contains(r.URL(), "/auth/oidc/callback") {
			mu.Lock()
			callbacks = append(callbacks, r.URL())
			mu.Unlock()
		}
	})

	_, err := page.Goto(portal.URL + "/")
	must(t, err)
	must(t, page.WaitForURL(regexp.MustCompile(`/signin\?next=%2F$`)))
	must(t, expect.Locator(page.GetByTestId("signin-oidc")).ToHaveText("Sign in with Test IdP"))
	must(t, expect.Locator(page.GetByTestId("login")).ToBeVisible()) // both ways in while on loopback
	screenshot(t, page, "1-signin")

	signInWithProvider(t, page, opAlice)
	must(t, page.WaitForURL(portal.URL+"/"))
	must(t, expect.Locator(page.GetByTestId("whoami")).ToContainText("Alice Liddell"))
	must(t, expect.Locator(page.GetByTestId("whoami")).ToContainText("admin")) // from the vdi-admins group
	screenshot(t, page, "2-home")

	t.Run("session is the OIDC login for the API too", func(t *testing.T) {
		res, err := page.Request().Get(portal.URL + "/api/vdi/desktops?all=1")
		must(t, err)
		if res.Status() != 200 {
			t.Errorf("admin listing with the OIDC session: %d; want 200", res.Status())
		}
		var d desktop
		if code := portal.API(t, "carol@example.com", "POST", "/api/vdi/pools/local/demo/claim", &d); code != 200 || d.Holder != "carol@example.com" {
			t.Errorf("Tailscale header alongside OIDC: %d %+v; want a claim held by carol@example.com", code, d)
		}
		portal.API(t, "carol@example.com", "POST", "/api/vdi/desktops/local/"+d.Name+"/release", nil)
	})

	mu.Lock()
	if len(callbacks) != 1 {
		t.Fatalf("saw %d callbacks; want 1", len(callbacks))
	}
	cb := callbacks[0]
	mu.Unlock()

	t.Run("replayed callback is refused", func(t *testing.T) {
		res, err := page.Goto(cb)
		must(t, err)
		if res.Status() != 401 {
			t.Errorf("replayed callback: %d; want 401", res.Status())
		}
		must(t, expect.Locator(page.GetByTestId("error")).ToContainText("expired or was already used"))
		screenshot(t, page, "3-replayed")
	})

	t.Run("wrong state is refused", func(t *testing.T) {
		u, _ := url.Parse(cb)
		q := u.Query()
		q.Set("state", "forged")
		u.RawQuery = q.Encode()
		res, err := page.Goto(u.String())
		must(t, err)
		if res.Status() != 401 {
			t.Errorf("callback with a forged state: %d; want 401", res.Status())
		}
	})

	t.Run("sign out ends the provider session too", func(t *testing.T) {
		_, err := page.Goto(portal.URL + "/")
		must(t, err)
		must(t, page.GetByRole("button", playwright.PageGetByRoleOptions{Name: "Sign out"}).Click())
		must(t, page.WaitForURL(regexp.MustCompile(`/signin$`)))
		if ended := op.EndedSessions(); len(ended) != 1 || ended[0] != opAlice.ID {
			t.Errorf("provider ended sessions %v; want [%s]", ended, opAlice.ID)
		}
		_, err = page.Goto(portal.URL + "/")
		must(t, err)
		must(t, page.WaitForURL(regexp.MustCompile(`/signin\?next=`)))
		// The provider asks for the password again: its session is gone.
		must(t, page.GetByTestId("signin-oidc").Click())
		must(t, expect.Locator(page.GetByTestId("op-password")).ToBeVisible())
		screenshot(t, page, "4-provider-after-signout")
	})

	t.Run("tampered ID token is refused", func(t *testing.T) {
		op.TamperIDTokens(func(tok string) string {
			b := []byte(tok)
			b[len(b)-3] ^= 0x01
			return string(b)
		})
		defer op.TamperIDTokens(nil)
		must(t, page.GetByTestId("op-username").Fill(opBob.Username))
		must(t, page.GetByTestId("op-password").Fill(opBob.Password))
		must(t, page.GetByTestId("op-signin").Click())
		must(t, expect.Locator(page.GetByTestId("error")).ToContainText("ID token did not verify"))
		res, err := page.Request().Get(portal.URL + "/api/vdi/pools")
		must(t, err)
		if res.Status() != 401 {
			t.Errorf("API after a tampered ID token: %d; want 401", res.Status())
		}
	})

	log := portal.Log()
	for _, secret := range []string{oidcSecret, oidcSessionKey, "c2Vzc2lvbi1rZXk"} {
		if strings.Contains(log, secret) {
			t.Errorf("portal log shows a secret (%.12s…)", secret)
		}
	}
}

// TestOIDC_SessionExpires signs in and waits out a short session lifetime.
func TestOIDC_SessionExpires(t *testing.T) {
	portal, _ := mustStartOIDCPortal(t, "oidc", "CORRAL_VDI_SESSION_LIFETIME=3s", "CORRAL_VDI_DEMO_POOL_SIZE=0")
	page := MustLaunchBrowser(t).MustNewPage(t, 1024, 700)
	expect := playwright.NewPlaywrightAssertions(testwait.MS(10000))
	_, err := page.Goto(portal.URL + "/")
	must(t, err)
	must(t, expect.Locator(page.GetByTestId("login")).ToHaveCount(0)) // OIDC only: no name form
	screenshot(t, page, "1-signin-oidc-only")
	signInWithProvider(t, page, opBob)
	must(t, expect.Locator(page.GetByTestId("whoami")).ToContainText("Bob Builder"))
	signedIn := time.Now()
	time.Sleep(3500 * time.Millisecond)
	res, err := page.Request().Get(portal.URL + "/api/vdi/pools")
	must(t, err)
	if res.Status() != 401 {
		t.Errorf("API %v after sign-in with a 3s session: %d; want 401", time.Since(signedIn).Round(time.Millisecond), res.Status())
	}
	_, err = page.Goto(portal.URL + "/")
	must(t, err)
	must(t, page.WaitForURL(regexp.MustCompile(`/signin\?next=`)))
}

// TestOIDC_StartupErrors runs the binary with incomplete OIDC settings: it
// must refuse to start and say what to set.
func TestOIDC_StartupErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  []string
		want string
	}{
		{"no session key", []string{"CORRAL_VDI_AUTH=oidc", "CORRAL_VDI_OIDC_ISSUER=https://id.example.com",
			"CORRAL_VDI_OIDC_CLIENT_ID=x", "CORRAL_VDI_OIDC_REDIRECT_URL=https://vdi.example.com/auth/oidc/callback"}, "CORRAL_VDI_SESSION_KEYS is not set"},
		{"no redirect URL", []string{"CORRAL_VDI_AUTH=oidc", "CORRAL_VDI_OIDC_ISSUER=https://id.example.com",
			"CORRAL_VDI_OIDC_CLIENT_ID=x", "CORRAL_VDI_SESSION_KEYS=" + oidcSessionKey}, "CORRAL_VDI_OIDC_REDIRECT_URL"},
		{"short key", []string{"CORRAL_VDI_AUTH=oidc", "CORRAL_VDI_SESSION_KEYS=c2hvcnQ="}, "at least 32"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := runPortal(t, tc.env...)
			if err == nil || !strings.Contains(out, tc.want) {
				t.Errorf("portal with %v: err %v, output %q; want a refusal mentioning %q", tc.env, err, out, tc.want)
			}
			if strings.Contains(out, oidcSessionKey) {
				t.Errorf("start-up error shows the session key: %q", out)
			}
		})
	}
}

// runPortal runs `serve` expecting it to fail at start-up, and returns its
// combined output.
func runPortal(tb testing.TB, env ...string) (string, error) {
	tb.Helper()
	cmd := newPortalCmd(tb, env...)
	done := make(chan struct{})
	var out []byte
	var err error
	go func() { out, err = cmd.CombinedOutput(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		<-done
		return string(out), fmt.Errorf("still running after 20s")
	}
	return string(out), err
}
