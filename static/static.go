// Package static embeds the portal's browser assets and serves them at
// content-hashed URLs with long cache lifetimes.
//
// Six top-level folders are embedded: app/ (our own code, committed),
// bundle/ (the console pages' modules of app/ and the pages' stylesheet,
// which scripts/assets.sh bundles at build time) and the third-party clients novnc/, xterm/,
// ironrdp/ and asciinema/, which scripts/assets.sh copies from the pinned
// npm packages (bundle/ and the clients are gitignored; only a placeholder
// README.md is committed, so a fresh clone still compiles but
// [Assets.Missing] reports them as absent).
//
// Hashes are per folder, not per file: a page loads
// /static/bundle.<hash>/console.js and the relative ES-module imports inside
// bundle/ resolve to the same hashed folder without rewriting any file.
package static

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"path"
	"regexp"
	"strings"
)

// Entry files of the third-party clients, as paths for [Assets.URL]. Pages
// import these by name so that a client upgrade that moves a file fails in
// one place (scripts/assets.sh checks the same list).
const (
	// NoVNC is noVNC's RFB client, bundled by scripts/assets.sh into one
	// ES module whose default export is the RFB class.
	NoVNC = "novnc/rfb.js"
	// XTerm is xterm.js as a self-contained ES module exporting Terminal.
	XTerm = "xterm/xterm.mjs"
	// XTermCSS is the stylesheet xterm.js needs.
	XTermCSS = "xterm/xterm.css"
	// XTermFit is the fit addon, an ES module exporting FitAddon.
	XTermFit = "xterm/addon-fit.mjs"
	// XTermAttach is the attach addon, an ES module exporting AttachAddon.
	XTermAttach = "xterm/addon-attach.mjs"
	// IronRDP is the <iron-remote-desktop> web component, an ES module that
	// defines the element when imported.
	IronRDP = "ironrdp/iron-remote-desktop.js"
	// IronRDPBackend is the RDP backend for the web component, an ES module
	// exporting init and Backend; init fetches and compiles IronRDPWasm.
	IronRDPBackend = "ironrdp/iron-remote-desktop-rdp.js"
	// IronRDPWasm is the RDP backend's wasm. scripts/assets.sh writes it
	// as ironrdp/ironrdp.<sha256 prefix>.wasm; [Assets.URL] and
	// [Assets.Has] find it by this name without the hash.
	IronRDPWasm = "ironrdp/ironrdp.wasm"
	// Asciinema is asciinema-player's self-contained browser bundle, a
	// classic script that defines the global AsciinemaPlayer (with create).
	Asciinema = "asciinema/asciinema-player.min.js"
	// AsciinemaCSS is the stylesheet asciinema-player needs.
	AsciinemaCSS = "asciinema/asciinema-player.css"
)

// Prefix is the URL path under which [Assets.Handler] serves files. Mount the
// handler at this pattern without stripping it.
const Prefix = "/static/"

// clients maps each built folder (the third-party clients and the bundle)
// to the files it must contain to be usable, in the order [Assets.Missing]
// reports them.
var clients = []struct {
	name    string
	entries []string
}{
	{"novnc", []string{NoVNC}},
	{"xterm", []string{XTerm, XTermCSS, XTermFit, XTermAttach}},
	{"ironrdp", []string{IronRDP, IronRDPBackend, IronRDPWasm}},
	{"asciinema", []string{Asciinema, AsciinemaCSS}},
	{"bundle", []string{"bundle/console.js", "bundle/app.css"}},
}

//go:embed novnc xterm ironrdp asciinema app bundle
var embedded embed.FS

// Assets is an index of the embedded files: a content hash per top-level
// folder and an ETag per file. It is immutable after [New] and safe for
// concurrent use.
type Assets struct {
	fsys    fs.FS
	folders map[string]string // folder -> hash
	files   map[string]string // path -> ETag
	// hashed maps the name of a file without its content hash
	// ("ironrdp/ironrdp.wasm") to the file ("ironrdp/ironrdp.<hash>.wasm").
	hashed map[string]string
	// imports maps an ES module to the embedded modules it imports
	// statically (relative specifiers only).
	imports map[string][]string
}

// importSpec finds the relative specifiers of static imports and re-exports
// (`import x from "./a.js"`, `import "./b.js"`, `export {y} from "../c.js"`).
// A match inside a string or comment only adds a needless preload.
var importSpec = regexp.MustCompile(`(?:^|[;}\s])(?:import|export)\s*(?:[\w$*{}\s,]*?\s*from\s*)?["'](\.\.?/[^"'\n]+)["']`)

// hashedName matches a file name that carries its own content hash:
// <name>.<16 hex>.<ext>.
var hashedName = regexp.MustCompile(`^(.+)\.[0-9a-f]{16}(\.[a-z0-9]+)$`)

// New indexes the embedded assets. It reads every file once, so call it once
// at startup and share the result.
func New() (*Assets, error) {
	return newAssets(embedded)
}

// newAssets indexes fsys, whose top-level directories become the hashed
// folders; tests pass an fstest.MapFS.
func newAssets(fsys fs.FS) (*Assets, error) {
	a := &Assets{
		fsys:    fsys,
		folders: make(map[string]string),
		files:   make(map[string]string),
		hashed:  make(map[string]string),
		imports: make(map[string][]string),
	}
	top, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("static: read root: %w", err)
	}
	for _, d := range top {
		if !d.IsDir() {
			continue
		}
		if strings.Contains(d.Name(), ".") {
			// The hash is appended after a dot; a dotted folder name
			// would make URLs ambiguous.
			return nil, fmt.Errorf("static: folder %q: name contains a dot", d.Name())
		}
		if err := a.indexFolder(d.Name()); err != nil {
			return nil, err
		}
	}
	return a, nil
}

// indexFolder hashes every file under folder, in fs.WalkDir's lexical order
// so the hash depends only on names and contents.
func (a *Assets) indexFolder(folder string) error {
	folderHash := sha256.New()
	err := fs.WalkDir(a.fsys, folder, func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		f, err := a.fsys.Open(name)
		if err != nil {
			return err
		}
		defer f.Close()
		fileHash := sha256.New()
		var src bytes.Buffer
		w := io.Writer(fileHash)
		if ext := path.Ext(name); ext == ".js" || ext == ".mjs" {
			w = io.MultiWriter(fileHash, &src)
		}
		n, err := io.Copy(w, f)
		if err != nil {
			return err
		}
		for _, m := range importSpec.FindAllSubmatch(src.Bytes(), -1) {
			a.imports[name] = append(a.imports[name], path.Join(path.Dir(name), string(m[1])))
		}
		sum := fileHash.Sum(nil)
		a.files[name] = `"` + hex.EncodeToString(sum[:16]) + `"`
		if m := hashedName.FindStringSubmatch(name); m != nil {
			a.hashed[m[1]+m[2]] = name
		}
		// Length-prefix the name so that no two trees hash alike by
		// shifting bytes between a name and the content before it.
		var lens [16]byte
		binary.BigEndian.PutUint64(lens[:8], uint64(len(name)))
		binary.BigEndian.PutUint64(lens[8:], uint64(n))
		folderHash.Write(lens[:])
		io.WriteString(folderHash, name)
		folderHash.Write(sum)
		return nil
	})
	if err != nil {
		return fmt.Errorf("static: index %s: %w", folder, err)
	}
	a.folders[folder] = hex.EncodeToString(folderHash.Sum(nil))[:12]
	return nil
}

// URL returns the hashed URL of the embedded file at name, e.g.
// URL("novnc/core/rfb.js") = "/static/novnc.<hash>/core/rfb.js". For a name
// that is not embedded it returns the unhashed "/static/<name>", which the
// handler answers with 404; use [Assets.Has] to tell the cases apart. A file
// that carries its own content hash (<name>.<16 hex>.<ext>) is also found by
// its name without it.
func (a *Assets) URL(name string) string {
	name = a.resolve(name)
	folder, rest, _ := strings.Cut(name, "/")
	if _, ok := a.files[name]; !ok {
		return Prefix + name
	}
	return Prefix + folder + "." + a.folders[folder] + "/" + rest
}

// Modules returns the hashed URLs of the ES module at name and of every
// embedded module it imports statically, directly or not, in the order
// found (name first), for modulepreload links. Dynamic import() is not
// followed: what a module loads later is not preloaded with it.
func (a *Assets) Modules(name string) []string {
	name = a.resolve(name)
	if _, ok := a.files[name]; !ok {
		return nil
	}
	seen := map[string]bool{name: true}
	order := []string{name}
	for i := 0; i < len(order); i++ {
		for _, dep := range a.imports[order[i]] {
			if _, ok := a.files[dep]; ok && !seen[dep] {
				seen[dep] = true
				order = append(order, dep)
			}
		}
	}
	urls := make([]string, len(order))
	for i, n := range order {
		urls[i] = a.URL(n)
	}
	return urls
}

// Has reports whether the file at name (e.g. "novnc/core/rfb.js") is
// embedded.
func (a *Assets) Has(name string) bool {
	_, ok := a.files[a.resolve(name)]
	return ok
}

// resolve returns the embedded file name is (without a leading slash), or
// the hashed file it names.
func (a *Assets) resolve(name string) string {
	name = strings.TrimPrefix(name, "/")
	if _, ok := a.files[name]; !ok {
		if f, ok := a.hashed[name]; ok {
			return f
		}
	}
	return name
}

// Missing returns the third-party clients ("novnc", "xterm", "ironrdp")
// and the bundle of the console pages' modules ("bundle") whose entry files
// are not embedded, typically because the binary was built without running
// scripts/assets.sh first. It returns nil when every
// client is present.
func (a *Assets) Missing() []string {
	var missing []string
	for _, c := range clients {
		for _, e := range c.entries {
			if !a.Has(e) {
				missing = append(missing, c.name)
				break
			}
		}
	}
	return missing
}

// contentTypes fixes the types that matter to browsers instead of trusting
// the host's mime tables: module scripts must be served as JavaScript and
// wasm as application/wasm for instantiateStreaming.
var contentTypes = map[string]string{
	".js":    "text/javascript; charset=utf-8",
	".mjs":   "text/javascript; charset=utf-8",
	".css":   "text/css; charset=utf-8",
	".wasm":  "application/wasm",
	".json":  "application/json",
	".map":   "application/json",
	".svg":   "image/svg+xml",
	".png":   "image/png",
	".ico":   "image/x-icon",
	".gif":   "image/gif",
	".jpg":   "image/jpeg",
	".webp":  "image/webp",
	".woff":  "font/woff",
	".woff2": "font/woff2",
	".html":  "text/html; charset=utf-8",
	".md":    "text/plain; charset=utf-8",
	".txt":   "text/plain; charset=utf-8",
}

// contentType returns the Content-Type for name. Files the tables do not know
// (licence files such as LICENSE.MPL-2.0, AUTHORS) are plain text, never
// sniffed.
func contentType(name string) string {
	ext := strings.ToLower(path.Ext(name))
	if t, ok := contentTypes[ext]; ok {
		return t
	}
	if t := mime.TypeByExtension(ext); t != "" {
		return t
	}
	return "text/plain; charset=utf-8"
}
