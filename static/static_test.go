package static

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
)

// testFS is a small tree shaped like the real one: clients with entry files,
// a placeholder, a licence and our own app folder.
func testFS() fstest.MapFS {
	return fstest.MapFS{
		"novnc/README.md":        {Data: []byte("placeholder")},
		"novnc/core/rfb.js":      {Data: []byte("import './util/int.js';\nexport default class RFB {}\n")},
		"novnc/core/util/int.js": {Data: []byte("export const x = 1;\n")},
		"novnc/rfb.js":           {Data: []byte("export default class RFB {}\n")},
		"novnc/LICENSE.MPL-2.0":  {Data: []byte("Mozilla Public License")},
		"xterm/README.md":        {Data: []byte("placeholder")},
		"ironrdp/README.md":      {Data: []byte("placeholder")},
		"ironrdp/backend.wasm":   {Data: []byte("\x00asm\x01\x00\x00\x00")},
		"app/app.css":            {Data: []byte("body { margin: 0 }\n")},
	}
}

// MustAssets indexes fsys or fails the test.
func MustAssets(tb testing.TB, fsys fstest.MapFS) *Assets {
	tb.Helper()
	a, err := newAssets(fsys)
	if err != nil {
		tb.Fatalf("newAssets: %v", err)
	}
	return a
}

// serve sends one request to a's handler.
func serve(tb testing.TB, a *Assets, method, target string, header http.Header) *httptest.ResponseRecorder {
	tb.Helper()
	req := httptest.NewRequest(method, target, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	a.Handler().ServeHTTP(rec, req)
	return rec
}

func TestAssets_URL(t *testing.T) {
	fsys := testFS()
	a := MustAssets(t, fsys)

	t.Run("Hashed", func(t *testing.T) {
		got := a.URL("novnc/core/rfb.js")
		if !regexp.MustCompile(`^/static/novnc\.[0-9a-f]{12}/core/rfb\.js$`).MatchString(got) {
			t.Errorf("URL(novnc/core/rfb.js) = %q; want /static/novnc.<12 hex>/core/rfb.js", got)
		}
		if got, want := a.URL("/novnc/core/rfb.js"), a.URL("novnc/core/rfb.js"); got != want {
			t.Errorf("URL with leading slash = %q; want %q", got, want)
		}
	})

	t.Run("SameFolderSameHash", func(t *testing.T) {
		// Relative imports inside a client only work if the whole
		// folder shares one hashed prefix.
		rfb, util := a.URL("novnc/core/rfb.js"), a.URL("novnc/core/util/int.js")
		if got, want := strings.TrimSuffix(util, "/core/util/int.js"), strings.TrimSuffix(rfb, "/core/rfb.js"); got != want {
			t.Errorf("folder prefix of %q = %q; want %q", util, got, want)
		}
	})

	t.Run("Stable", func(t *testing.T) {
		b := MustAssets(t, testFS())
		for _, name := range []string{"novnc/core/rfb.js", "app/app.css", "ironrdp/backend.wasm"} {
			if got, want := b.URL(name), a.URL(name); got != want {
				t.Errorf("second index: URL(%s) = %q; want %q", name, got, want)
			}
		}
	})

	t.Run("ChangeMovesOnlyItsFolder", func(t *testing.T) {
		changed := testFS()
		changed["app/app.css"] = &fstest.MapFile{Data: []byte("body { margin: 1px }\n")}
		b := MustAssets(t, changed)
		if b.URL("app/app.css") == a.URL("app/app.css") {
			t.Errorf("URL(app/app.css) did not change with its content: %q", b.URL("app/app.css"))
		}
		if got, want := b.URL("novnc/core/rfb.js"), a.URL("novnc/core/rfb.js"); got != want {
			t.Errorf("URL(novnc/core/rfb.js) = %q after an app change; want %q", got, want)
		}
	})

	t.Run("RenameMovesHash", func(t *testing.T) {
		renamed := testFS()
		renamed["app/main.css"] = renamed["app/app.css"]
		delete(renamed, "app/app.css")
		b := MustAssets(t, renamed)
		if a.folders["app"] == b.folders["app"] {
			t.Errorf("app hash %q unchanged after a rename", a.folders["app"])
		}
	})

	t.Run("OwnHash", func(t *testing.T) {
		// A file named for its own content is found by its name
		// without the hash, at the hashed folder like any other.
		fsys := testFS()
		fsys["ironrdp/ironrdp.0123456789abcdef.wasm"] = &fstest.MapFile{Data: []byte("\x00asm\x01\x00\x00\x00")}
		b := MustAssets(t, fsys)
		got := b.URL(IronRDPWasm)
		if !regexp.MustCompile(`^/static/ironrdp\.[0-9a-f]{12}/ironrdp\.0123456789abcdef\.wasm$`).MatchString(got) {
			t.Errorf("URL(%s) = %q; want /static/ironrdp.<12 hex>/ironrdp.0123456789abcdef.wasm", IronRDPWasm, got)
		}
		if got, want := b.URL("ironrdp/ironrdp.0123456789abcdef.wasm"), got; got != want {
			t.Errorf("URL by the file's own name = %q; want %q", got, want)
		}
		if !b.Has(IronRDPWasm) || a.Has(IronRDPWasm) {
			t.Errorf("Has(%s) = %v with the file, %v without; want true, false", IronRDPWasm, b.Has(IronRDPWasm), a.Has(IronRDPWasm))
		}
		rec := serve(t, b, http.MethodGet, got, nil)
		if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/wasm" {
			t.Errorf("GET %s: %d %q; want 200 application/wasm", got, rec.Code, rec.Header().Get("Content-Type"))
		}
	})

	t.Run("Unknown", func(t *testing.T) {
		if got, want := a.URL("novnc/nope.js"), "/static/novnc/nope.js"; got != want {
			t.Errorf("URL(novnc/nope.js) = %q; want %q", got, want)
		}
		if a.Has("novnc/nope.js") {
			t.Error("Has(novnc/nope.js) = true; want false")
		}
		if !a.Has("novnc/core/rfb.js") {
			t.Error("Has(novnc/core/rfb.js) = false; want true")
		}
	})
}

func TestAssets_Handler(t *testing.T) {
	a := MustAssets(t, testFS())
	rfb := a.URL("novnc/core/rfb.js")
	hash := a.folders["novnc"]

	t.Run("OK", func(t *testing.T) {
		rec := serve(t, a, http.MethodGet, rfb, nil)
		if rec.Code != http.StatusOK {
			t.Fatalf("GET %s: status = %d; want 200", rfb, rec.Code)
		}
		for k, want := range map[string]string{
			"Content-Type":           "text/javascript; charset=utf-8",
			"Cache-Control":          "public, max-age=31536000, immutable",
			"X-Content-Type-Options": "nosniff",
			"ETag":                   a.files["novnc/core/rfb.js"],
		} {
			if got := rec.Header().Get(k); got != want {
				t.Errorf("GET %s: %s = %q; want %q", rfb, k, got, want)
			}
		}
		if got, want := rec.Body.String(), string(testFS()["novnc/core/rfb.js"].Data); got != want {
			t.Errorf("GET %s: body = %q; want %q", rfb, got, want)
		}
	})

	t.Run("Head", func(t *testing.T) {
		rec := serve(t, a, http.MethodHead, rfb, nil)
		if rec.Code != http.StatusOK {
			t.Fatalf("HEAD %s: status = %d; want 200", rfb, rec.Code)
		}
		if rec.Body.Len() != 0 {
			t.Errorf("HEAD %s: body has %d bytes; want none", rfb, rec.Body.Len())
		}
		if got, want := rec.Header().Get("Content-Length"), strconv.Itoa(len(testFS()["novnc/core/rfb.js"].Data)); got != want {
			t.Errorf("HEAD %s: Content-Length = %q; want %q", rfb, got, want)
		}
		if got := rec.Header().Get("Cache-Control"); !strings.Contains(got, "immutable") {
			t.Errorf("HEAD %s: Cache-Control = %q; want immutable", rfb, got)
		}
	})

	t.Run("NotModified", func(t *testing.T) {
		rec := serve(t, a, http.MethodGet, rfb, http.Header{"If-None-Match": {a.files["novnc/core/rfb.js"]}})
		if rec.Code != http.StatusNotModified {
			t.Errorf("GET %s with its ETag: status = %d; want 304", rfb, rec.Code)
		}
	})

	t.Run("ContentTypes", func(t *testing.T) {
		for name, want := range map[string]string{
			"ironrdp/backend.wasm":  "application/wasm",
			"app/app.css":           "text/css; charset=utf-8",
			"novnc/LICENSE.MPL-2.0": "text/plain; charset=utf-8",
			"novnc/README.md":       "text/plain; charset=utf-8",
		} {
			rec := serve(t, a, http.MethodGet, a.URL(name), nil)
			if got := rec.Header().Get("Content-Type"); rec.Code != http.StatusOK || got != want {
				t.Errorf("GET %s: %d %q; want 200 %q", a.URL(name), rec.Code, got, want)
			}
		}
	})

	for _, tt := range []struct {
		name, target string
	}{
		{"StaleHash", "/static/novnc.0123456789ab/core/rfb.js"},
		{"NoHash", "/static/novnc/core/rfb.js"},
		{"EmptyHash", "/static/novnc./core/rfb.js"},
		{"StaleHashWithQuery", "/static/novnc.0123456789ab/core/rfb.js?v=1"},
	} {
		t.Run("Redirect"+tt.name, func(t *testing.T) {
			rec := serve(t, a, http.MethodGet, tt.target, nil)
			if rec.Code != http.StatusFound {
				t.Fatalf("GET %s: status = %d; want 302", tt.target, rec.Code)
			}
			want := rfb
			if _, q, ok := strings.Cut(tt.target, "?"); ok {
				want += "?" + q
			}
			if got := rec.Header().Get("Location"); got != want {
				t.Errorf("GET %s: Location = %q; want %q", tt.target, got, want)
			}
			if got := rec.Header().Get("Cache-Control"); got != "no-cache" {
				t.Errorf("GET %s: Cache-Control = %q; want no-cache", tt.target, got)
			}
		})
	}

	for _, tt := range []struct {
		name, target string
	}{
		{"UnknownFile", "/static/novnc." + hash + "/core/nope.js"},
		{"UnknownFileStaleHash", "/static/novnc.0123456789ab/core/nope.js"},
		{"UnknownFolder", "/static/secret." + hash + "/core/rfb.js"},
		{"Directory", "/static/novnc." + hash + "/core"},
		{"DirectorySlash", "/static/novnc." + hash + "/core/"},
		{"FolderOnly", "/static/novnc." + hash + "/"},
		{"Root", "/static/"},
		{"Traversal", "/static/novnc." + hash + "/../app/app.css"},
		{"TraversalInside", "/static/novnc." + hash + "/core/../core/rfb.js"},
		{"DotSegment", "/static/novnc." + hash + "/./core/rfb.js"},
		{"DoubleSlash", "/static/novnc." + hash + "//core/rfb.js"},
		{"EscapedTraversal", "/static/novnc." + hash + "/%2e%2e/app/app.css"},
		{"OtherPrefix", "/assets/novnc." + hash + "/core/rfb.js"},
	} {
		t.Run("NotFound"+tt.name, func(t *testing.T) {
			rec := serve(t, a, http.MethodGet, tt.target, nil)
			if rec.Code != http.StatusNotFound {
				t.Errorf("GET %s: status = %d; want 404", tt.target, rec.Code)
			}
			if got := rec.Header().Get("X-Content-Type-Options"); got != "nosniff" {
				t.Errorf("GET %s: X-Content-Type-Options = %q; want nosniff", tt.target, got)
			}
		})
	}

	t.Run("MethodNotAllowed", func(t *testing.T) {
		rec := serve(t, a, http.MethodPost, rfb, nil)
		if rec.Code != http.StatusMethodNotAllowed {
			t.Errorf("POST %s: status = %d; want 405", rfb, rec.Code)
		}
		if got := rec.Header().Get("Allow"); got != "GET, HEAD" {
			t.Errorf("POST %s: Allow = %q; want %q", rfb, got, "GET, HEAD")
		}
	})

	t.Run("ThroughServeMux", func(t *testing.T) {
		// The way the portal mounts it; the mux cleans "..", and the
		// cleaned unhashed path must still not escape to another folder.
		mux := http.NewServeMux()
		mux.Handle("GET "+Prefix, a.Handler())
		srv := httptest.NewServer(mux)
		defer srv.Close()
		res, err := srv.Client().Get(srv.URL + rfb)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK || !strings.Contains(string(body), "class RFB") {
			t.Errorf("GET %s via mux: %d %q; want 200 with the file", rfb, res.StatusCode, body)
		}
	})
}

func TestAssets_Modules(t *testing.T) {
	fsys := testFS()
	fsys["novnc/core/util/int.js"] = &fstest.MapFile{Data: []byte("import { y } from '../../vendor/z.js';\nexport const x = y;\nimport('./lazy.js');\n")}
	fsys["novnc/vendor/z.js"] = &fstest.MapFile{Data: []byte("export const y = 1; import './../core/rfb.js';\n")}
	fsys["novnc/core/util/lazy.js"] = &fstest.MapFile{Data: []byte("export const z = 1;\n")}
	a := MustAssets(t, fsys)
	var want []string
	for _, n := range []string{"novnc/core/rfb.js", "novnc/core/util/int.js", "novnc/vendor/z.js"} {
		want = append(want, a.URL(n))
	}
	if got := a.Modules("novnc/core/rfb.js"); !slices.Equal(got, want) {
		t.Errorf("Modules(novnc/core/rfb.js) = %q; want %q (static imports, each once, not the dynamic one)", got, want)
	}
	if got := a.Modules("novnc/nope.js"); got != nil {
		t.Errorf("Modules(novnc/nope.js) = %q; want nil", got)
	}
}

func TestAssets_Missing(t *testing.T) {
	t.Run("Placeholders", func(t *testing.T) {
		fsys := fstest.MapFS{
			"novnc/README.md":   {Data: []byte("placeholder")},
			"xterm/README.md":   {Data: []byte("placeholder")},
			"ironrdp/README.md": {Data: []byte("placeholder")},
			"app/README.md":     {Data: []byte("placeholder")},
		}
		got, want := MustAssets(t, fsys).Missing(), []string{"novnc", "xterm", "ironrdp", "asciinema", "bundle"}
		if !slices.Equal(got, want) {
			t.Errorf("Missing() = %q; want %q", got, want)
		}
	})

	t.Run("PartialClient", func(t *testing.T) {
		fsys := testFS()
		fsys[XTerm] = &fstest.MapFile{Data: []byte("export{x as Terminal}")}
		got, want := MustAssets(t, fsys).Missing(), []string{"xterm", "ironrdp", "asciinema", "bundle"}
		if !slices.Equal(got, want) {
			t.Errorf("Missing() = %q; want %q (xterm lacks its css and addons)", got, want)
		}
	})

	t.Run("Complete", func(t *testing.T) {
		fsys := testFS()
		for _, name := range []string{XTerm, XTermCSS, XTermFit, XTermAttach, IronRDP, IronRDPBackend, Asciinema, AsciinemaCSS, "bundle/console.js", "bundle/app.css"} {
			fsys[name] = &fstest.MapFile{Data: []byte("x")}
		}
		fsys["ironrdp/ironrdp.0123456789abcdef.wasm"] = &fstest.MapFile{Data: []byte("\x00asm\x01\x00\x00\x00")}
		if got := MustAssets(t, fsys).Missing(); got != nil {
			t.Errorf("Missing() = %q; want nil", got)
		}
	})
}

func TestNewAssets_DottedFolder(t *testing.T) {
	if _, err := newAssets(fstest.MapFS{"a.b/x.js": {Data: []byte("x")}}); err == nil {
		t.Error("newAssets with folder a.b: err = nil; want an error")
	}
}

// TestNew checks the real embedded tree. Without scripts/assets.sh only the
// placeholders are there, so the client checks are skipped.
func TestNew(t *testing.T) {
	a, err := New()
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	for _, folder := range []string{"novnc", "xterm", "ironrdp", "app"} {
		if len(a.folders[folder]) != 12 {
			t.Errorf("hash of %s = %q; want 12 hex digits", folder, a.folders[folder])
		}
	}
	if missing := a.Missing(); len(missing) > 0 {
		t.Skipf("browser assets missing (%v): run scripts/assets.sh", missing)
	}
	for name, want := range map[string]string{
		NoVNC:          "text/javascript; charset=utf-8",
		XTerm:          "text/javascript; charset=utf-8",
		XTermCSS:       "text/css; charset=utf-8",
		XTermFit:       "text/javascript; charset=utf-8",
		XTermAttach:    "text/javascript; charset=utf-8",
		IronRDP:        "text/javascript; charset=utf-8",
		IronRDPBackend: "text/javascript; charset=utf-8",
		IronRDPWasm:    "application/wasm",
	} {
		rec := serve(t, a, http.MethodHead, a.URL(name), nil)
		if got := rec.Header().Get("Content-Type"); rec.Code != http.StatusOK || got != want {
			t.Errorf("HEAD %s: %d %q; want 200 %q", a.URL(name), rec.Code, got, want)
		}
	}
	// noVNC is one bundled module: a page preloads it alone, with no
	// imports left to fetch one after another.
	if got, want := a.Modules(NoVNC), []string{a.URL(NoVNC)}; !slices.Equal(got, want) {
		t.Errorf("Modules(NoVNC) = %q; want %q (scripts/assets.sh bundles it)", got, want)
	}
}
