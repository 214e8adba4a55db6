package auth_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corral-dev/corral-vdi-portal/auth"
	"github.com/corral-dev/corral-vdi-portal/internal/testoidc"
	"github.com/corral-dev/corral-vdi-portal/vdi"
)

var alice = testoidc.User{ID: "u-alice", Username: "alice", Password: "alice-pw", Email: "alice@example.com",
	Name: "Alice Liddell", Groups: []string{"staff", "vdi-admins"}}

// carol is in so many groups that they do not fit in a cookie.
var carol = testoidc.User{ID: "u-carol", Username: "carol", Password: "carol-pw", Email: "carol@example.com", Name: "Carol",
	Groups: func() []string {
		g := []string{"vdi-admins"}
		for i := 0; i < 300; i++ {
			g = append(g, fmt.Sprintf("department-of-long-group-names-%03d", i))
		}
		return g
	}()}

// dave's provider has not verified his address: email_verified is absent.
var dave = testoidc.User{ID: "u-dave", Username: "dave", Password: "dave-pw", Email: "dave@example.com", Name: "Dave", EmailUnverified: true}

var bob = testoidc.User{ID: "u-bob", Username: "bob", Password: "bob-pw", Email: "bob@example.com", Name: "Bob", Groups: []string{"staff"}}

// rp is a portal-shaped relying party around an Authenticator: the
// login and callback routes, and /whoami answering with the identity.
type rp struct {
	URL   string
	OP    *testoidc.OP
	Auth  *auth.Authenticator
	clock *clock
}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.t = c.t.Add(d) }
func newClock() *clock               { return &clock{t: time.Now()} }
func keys(tb testing.TB, s string) auth.Keys {
	k, err := auth.ParseSessionKeys(s)
	if err != nil {
		tb.Fatal(err)
	}
	return k
}

const key1 = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=" // 32 bytes, base64

// mustStartRP starts a real OpenID Provider and a relying party using it.
func mustStartRP(tb testing.TB, modes ...string) *rp {
	tb.Helper()
	var handler http.Handler
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { handler.ServeHTTP(w, r) }))
	tb.Cleanup(srv.Close)
	op := testoidc.MustStart(tb, testoidc.Config{
		ClientID: "corral", ClientSecret: "s3cret-client",
		RedirectURIs: []string{srv.URL + auth.CallbackPath}, PostLogoutRedirectURIs: []string{srv.URL + auth.SignedOutPath},
		Users: []testoidc.User{alice, bob, carol, dave},
	})
	if len(modes) == 0 {
		modes = []string{auth.ModeOIDC}
	}
	c := newClock()
	a, err := auth.New(auth.Config{
		Modes: modes, TrustedProxies: nil, AdminGroups: []string{"vdi-admins"}, SessionKeys: keys(tb, key1),
		SessionLifetime: time.Hour, Now: c.Now,
		OIDC: auth.OIDCConfig{Issuer: op.Issuer, ClientID: "corral", ClientSecret: "s3cret-client", RedirectURL: srv.URL + auth.CallbackPath, ProviderName: "Test IdP"},
	})
	if err != nil {
		tb.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+auth.LoginPath, func(w http.ResponseWriter, r *http.Request) {
		to, err := a.StartOIDC(w, r, r.URL.Query().Get("next"))
		if err != nil {
			http.Error(w, err.Error(), 500)
			return
		}
		http.Redirect(w, r, to, http.StatusFound)
	})
	mux.HandleFunc("GET "+auth.CallbackPath, func(w http.ResponseWriter, r *http.Request) {
		next, err := a.FinishOIDC(w, r)
		if err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		http.Redirect(w, r, next, http.StatusSeeOther)
	})
	mux.HandleFunc("GET /whoami", func(w http.ResponseWriter, r *http.Request) {
		id, ok := a.Identify(r)
		if !ok {
			http.Error(w, "not signed in", http.StatusUnauthorized)
			return
		}
		json.NewEncoder(w).Encode(id)
	})
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "home") })
	handler = mux
	return &rp{URL: srv.URL, OP: op, Auth: a, clock: c}
}

// browser is an HTTP client with its own cookies that can stop at the
// portal's callback, as an attacker holding the redirect would.
type browser struct {
	*http.Client
	stopAtCallback bool
}

func newBrowser(tb testing.TB) *browser {
	jar, _ := cookiejar.New(nil)
	b := &browser{Client: &http.Client{Jar: jar}}
	b.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if b.stopAtCallback && req.URL.Path == auth.CallbackPath {
			return http.ErrUseLastResponse
		}
		return nil
	}
	return b
}

func (b *browser) get(tb testing.TB, u string) (*http.Response, string) {
	tb.Helper()
	res, err := b.Get(u)
	if err != nil {
		tb.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res, string(body)
}

// signInAt starts a sign-in at the portal, types the password into the
// provider's login page, and returns the final response. With
// stopAtCallback it returns the provider's redirect to the callback.
func (b *browser) signInAt(tb testing.TB, p *rp, u testoidc.User, next string) (*http.Response, string) {
	tb.Helper()
	res, body := b.get(tb, p.URL+auth.LoginPath+"?next="+url.QueryEscape(next))
	id := res.Request.URL.Query().Get("authRequestID")
	if res.StatusCode != 200 || id == "" {
		tb.Fatalf("login start ended at %s: %d %s; want the provider's login page", res.Request.URL, res.StatusCode, body)
	}
	res, err := b.PostForm(p.OP.Issuer+"/login", url.Values{"id": {id}, "username": {u.Username}, "password": {u.Password}})
	if err != nil {
		tb.Fatal(err)
	}
	defer res.Body.Close()
	buf, _ := io.ReadAll(res.Body)
	return res, string(buf)
}

func (b *browser) whoami(tb testing.TB, p *rp) (vdi.Identity, int) {
	tb.Helper()
	res, body := b.get(tb, p.URL+"/whoami")
	var id vdi.Identity
	if res.StatusCode == 200 {
		json.Unmarshal([]byte(body), &id)
	}
	return id, res.StatusCode
}

func TestOIDC_SignIn(t *testing.T) {
	p := mustStartRP(t)
	t.Run("OK", func(t *testing.T) {
		b := newBrowser(t)
		res, body := b.signInAt(t, p, alice, "/whoami")
		var id vdi.Identity
		if err := json.Unmarshal([]byte(body), &id); err != nil || res.Request.URL.Path != "/whoami" {
			t.Fatalf("after sign-in landed on %s: %d %q; want /whoami", res.Request.URL, res.StatusCode, body)
		}
		want := vdi.Identity{Login: "alice@example.com", Name: "Alice Liddell", Groups: []string{"staff", "vdi-admins"}, Admin: true}
		if fmt.Sprint(id) != fmt.Sprint(want) {
			t.Errorf("identity %+v; want %+v", id, want)
		}
	})
	t.Run("EmailNotVerified", func(t *testing.T) {
		b := newBrowser(t)
		res, body := b.signInAt(t, p, dave, "/whoami")
		if res.StatusCode != http.StatusUnauthorized || !strings.Contains(body, "not verified") {
			t.Errorf("dave without email_verified: %d %q; want refused as not verified", res.StatusCode, body)
		}
		if _, code := b.whoami(t, p); code != http.StatusUnauthorized {
			t.Errorf("dave after the refused sign-in: %d; want 401", code)
		}
	})
	t.Run("NotAdminWithoutGroup", func(t *testing.T) {
		b := newBrowser(t)
		b.signInAt(t, p, bob, "/")
		if id, code := b.whoami(t, p); code != 200 || id.Login != "bob@example.com" || id.Admin {
			t.Errorf("bob: %d %+v; want signed in, not admin", code, id)
		}
	})
	t.Run("TooManyGroupsForACookie", func(t *testing.T) {
		b := newBrowser(t)
		b.signInAt(t, p, carol, "/")
		if id, code := b.whoami(t, p); code != 200 || !id.Admin || len(id.Groups) != 1 {
			t.Errorf("carol with %d groups: %d, admin %v, %d groups kept; want signed in as admin with the admin group only",
				len(carol.Groups), code, id.Admin, len(id.Groups))
		}
	})
	t.Run("CookieFlags", func(t *testing.T) {
		b := newBrowser(t)
		b.stopAtCallback = true
		res, _ := b.signInAt(t, p, bob, "/")
		cb := httptest.NewRequest("GET", res.Header.Get("Location"), nil)
		for _, c := range b.Jar.Cookies(mustURL(t, p.URL+auth.CallbackPath)) {
			cb.AddCookie(c)
		}
		cb.TLS = nil
		cb.Header.Set("X-Forwarded-Proto", "https") // from an untrusted address: ignored
		rec := httptest.NewRecorder()
		if _, err := p.Auth.FinishOIDC(rec, cb); err != nil {
			t.Fatal(err)
		}
		var session *http.Cookie
		for _, c := range rec.Result().Cookies() {
			if c.Name == "corral_vdi_session" {
				session = c
			}
		}
		if session == nil || !session.HttpOnly || session.SameSite != http.SameSiteLaxMode || session.Secure || session.Path != "/" {
			t.Errorf("session cookie %+v; want HttpOnly, SameSite=Lax, Path=/, not Secure over plain HTTP", session)
		}
	})
}

func mustURL(tb testing.TB, s string) *url.URL {
	u, err := url.Parse(s)
	if err != nil {
		tb.Fatal(err)
	}
	return u
}

func TestOIDC_Refusals(t *testing.T) {
	p := mustStartRP(t)

	t.Run("WrongState", func(t *testing.T) {
		b := newBrowser(t)
		b.stopAtCallback = true
		res, _ := b.signInAt(t, p, alice, "/")
		cb := mustURL(t, res.Header.Get("Location"))
		q := cb.Query()
		q.Set("state", "attacker-chosen")
		cb.RawQuery = q.Encode()
		if res, body := b.get(t, cb.String()); res.StatusCode != 401 || !strings.Contains(body, "does not belong to this browser") {
			t.Errorf("callback with a wrong state: %d %q; want 401", res.StatusCode, body)
		}
		if _, code := b.whoami(t, p); code != 401 {
			t.Errorf("after a wrong state: whoami %d; want 401 (no session)", code)
		}
	})

	t.Run("ReplayedCode", func(t *testing.T) {
		b := newBrowser(t)
		b.stopAtCallback = true
		res, _ := b.signInAt(t, p, alice, "/")
		cb := res.Header.Get("Location")
		flow := b.Jar.Cookies(mustURL(t, p.URL+auth.CallbackPath)) // an attacker who also stole the flow cookie
		if res, _ := b.get(t, cb); res.StatusCode != 200 || res.Request.URL.Path != "/" {
			t.Fatalf("first use of the callback: %d at %s; want signed in and sent home", res.StatusCode, res.Request.URL)
		}
		// Same browser again: the flow cookie was used up.
		if res, body := b.get(t, cb); res.StatusCode != 401 || !strings.Contains(body, "already used") {
			t.Errorf("replayed callback: %d %q; want 401", res.StatusCode, body)
		}
		// Another browser with the stolen flow cookie: the provider refuses the used code.
		thief := newBrowser(t)
		thief.stopAtCallback = true
		thief.Jar.SetCookies(mustURL(t, p.URL+auth.CallbackPath), flow)
		before := len(p.OP.Codes())
		res, body := thief.get(t, cb)
		if res.StatusCode != 401 || !strings.Contains(body, "refused the sign-in code") {
			t.Errorf("replayed code with the flow cookie: %d %q; want 401 from the provider's refusal", res.StatusCode, body)
		}
		if codes := p.OP.Codes(); len(codes) != before+1 || codes[len(codes)-1] != mustURL(t, cb).Query().Get("code") {
			t.Errorf("token endpoint saw %d new codes; want the replayed code presented once more", len(codes)-before)
		}
		if _, code := thief.whoami(t, p); code != 401 {
			t.Errorf("thief after replay: %d; want 401", code)
		}
	})

	tamper := map[string]func(string) string{
		"ClaimsChanged": func(tok string) string {
			parts := strings.Split(tok, ".")
			payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
			payload = []byte(strings.Replace(string(payload), "alice@example.com", "root@example.com", 1))
			parts[1] = base64.RawURLEncoding.EncodeToString(payload)
			return strings.Join(parts, ".")
		},
		"Unsigned": func(tok string) string {
			parts := strings.Split(tok, ".")
			return base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + parts[1] + "."
		},
		"SignatureFlipped": func(tok string) string {
			b := []byte(tok)
			b[len(b)-5] ^= 0x01
			return string(b)
		},
	}
	for name, f := range tamper {
		t.Run("TamperedIDToken/"+name, func(t *testing.T) {
			p.OP.TamperIDTokens(f)
			defer p.OP.TamperIDTokens(nil)
			b := newBrowser(t)
			res, body := b.signInAt(t, p, alice, "/")
			if res.StatusCode != 401 || !strings.Contains(body, "did not verify") {
				t.Errorf("tampered ID token: %d %q; want 401", res.StatusCode, body)
			}
			if _, code := b.whoami(t, p); code != 401 {
				t.Errorf("after a tampered ID token: whoami %d; want 401", code)
			}
		})
	}

	t.Run("FlowExpired", func(t *testing.T) {
		b := newBrowser(t)
		b.stopAtCallback = true
		res, _ := b.signInAt(t, p, alice, "/")
		p.clock.Add(11 * time.Minute)
		defer p.clock.Add(-11 * time.Minute)
		if res, body := b.get(t, res.Header.Get("Location")); res.StatusCode != 401 || !strings.Contains(body, "expired") {
			t.Errorf("callback 11 minutes after the start: %d %q; want 401", res.StatusCode, body)
		}
	})

	t.Run("ProviderError", func(t *testing.T) {
		b := newBrowser(t)
		b.stopAtCallback = true
		b.signInAt(t, p, alice, "/") // leaves a flow cookie
		res, body := b.get(t, p.URL+auth.CallbackPath+"?error=access_denied&state=x")
		if res.StatusCode != 401 || !strings.Contains(body, "access_denied") {
			t.Errorf("provider error: %d %q; want 401 naming it", res.StatusCode, body)
		}
	})
}

func TestOIDC_SessionExpiresAndSignsOut(t *testing.T) {
	p := mustStartRP(t)
	b := newBrowser(t)
	b.signInAt(t, p, alice, "/")
	if _, code := b.whoami(t, p); code != 200 {
		t.Fatalf("whoami after sign-in: %d", code)
	}

	t.Run("SignOutAtProvider", func(t *testing.T) {
		req := httptest.NewRequest("POST", p.URL+"/signout", nil)
		for _, c := range b.Jar.Cookies(mustURL(t, p.URL)) {
			req.AddCookie(c)
		}
		to := p.Auth.SignOutURL(req)
		u := mustURL(t, to)
		if !strings.HasPrefix(to, p.OP.Issuer+"/end_session?") || u.Query().Get("id_token_hint") == "" ||
			u.Query().Get("post_logout_redirect_uri") != p.URL+auth.SignedOutPath || u.Query().Get("client_id") != "corral" {
			t.Fatalf("sign-out URL %s; want the provider's end_session with id_token_hint, client_id and our post-logout URI", to)
		}
		res, _ := b.get(t, to)
		if res.Request.URL.String() != p.URL+auth.SignedOutPath {
			t.Errorf("end_session sent the browser to %s; want %s", res.Request.URL, p.URL+auth.SignedOutPath)
		}
		if ended := p.OP.EndedSessions(); len(ended) != 1 || ended[0] != alice.ID {
			t.Errorf("provider ended sessions %v; want [%s]", ended, alice.ID)
		}
		// The provider asks for the password again.
		res, _ = b.get(t, p.URL+auth.LoginPath)
		if res.Request.URL.Path != "/login" {
			t.Errorf("sign-in after sign-out went to %s; want the provider's login page", res.Request.URL)
		}
	})

	t.Run("Expired", func(t *testing.T) {
		b := newBrowser(t)
		b.signInAt(t, p, bob, "/")
		p.clock.Add(59 * time.Minute)
		if _, code := b.whoami(t, p); code != 200 {
			t.Fatalf("whoami within the lifetime: %d; want 200", code)
		}
		p.clock.Add(2 * time.Minute)
		if _, code := b.whoami(t, p); code != 401 {
			t.Errorf("whoami after the session lifetime: %d; want 401", code)
		}
	})
}
