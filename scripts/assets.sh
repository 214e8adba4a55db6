#!/usr/bin/env bash
# Copies the pinned third-party browser clients from node_modules into
# static/<client>/ so that the Go package static can embed them.
#
# The copied files are build output: they are gitignored and never committed;
# only each client's placeholder README.md is. Versions are pinned in
# package.json / package-lock.json; `npm ci` runs only when node_modules is
# missing or older than the lockfile, so a second run takes well under a second.
#
# Layout produced (pages reference these through the static package's
# exported names, never by hand):
#   static/novnc/    rfb.js (noVNC's core and pako bundled into one ES module)
#   static/xterm/    xterm.mjs, xterm.css, addon-fit.mjs, addon-attach.mjs
#   static/ironrdp/  iron-remote-desktop.js (web component, ES module)
#                    iron-remote-desktop-rdp.js (RDP backend, ES module;
#                    its inlined wasm taken out into ironrdp.<sha256>.wasm)
#   static/asciinema/ asciinema-player.min.js (classic script, global
#                    AsciinemaPlayer), asciinema-player.css
#   static/bundle/   the console pages' modules of static/app/, bundled
#                    (console.js, kiosk.js, console-vnc.js, ..., chunk-*.js),
#                    and app.css, the pages' stylesheet
# Each client folder also gets its packages' licence files.
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."

nm=node_modules
static=static

# npm writes node_modules/.package-lock.json on every install, so its mtime
# says when node_modules last matched the lockfile.
if [[ ! -e $nm/.package-lock.json || package-lock.json -nt $nm/.package-lock.json ]]; then
	echo "assets: npm ci" >&2
	npm ci --no-audit --no-fund
fi

# bundled lists the modules of static/app/ that pages load by URL from
# static/bundle/ (views/clients.go names them); the home and admin pages
# load theirs from static/app/ as they are.
bundled=(console.js kiosk.js admin-shadow.js console-vnc.js console-rdp.js console-xterm.js
	console-audio.js console-files.js console-share.js)

# clean empties a client folder except its committed placeholder, so files
# dropped by an upgrade do not linger and get embedded.
clean() {
	mkdir -p "$1"
	find "$1" -mindepth 1 -maxdepth 1 ! -name README.md -exec rm -rf {} +
}

# licence writes a LICENSE file for a package that ships none, from the SPDX
# expression in its package.json.
licence() {
	local pkg=$1 out=$2
	node -e '
		const p = require(require("path").resolve(process.argv[1], "package.json"));
		process.stdout.write(`${p.name} ${p.version}\nLicense: ${p.license} (SPDX)\n` +
			`Source: ${p.homepage || p.repository.url}\n` +
			`The npm package ships no licence text; the licence texts are in the source repository.\n`);
	' "$pkg" >"$out"
}

# noVNC: its ES-module library (core/, with the vendored pako it imports)
# bundled by esbuild (a Go tool pinned in go.mod) into one ES module,
# novnc/rfb.js, whose default export is the RFB class; not the app/ UI,
# tests or docs. One file rather than 52: the console page's /connect
# request no longer queues behind them for the browser's six connections,
# and the page runs its console ~100 ms sooner (docs/performance.md).
novnc=$nm/@novnc/novnc
clean $static/novnc
go tool esbuild $novnc/core/rfb.js --bundle --format=esm --minify-syntax --minify-whitespace \
	--log-level=warning --outfile=$static/novnc/rfb.js
cp $novnc/vendor/pako/LICENSE $static/novnc/LICENSE.pako
cp $novnc/LICENSE.txt $novnc/AUTHORS $static/novnc/
cp $novnc/docs/LICENSE.* $static/novnc/

# The console pages' own modules (static/app/, committed), bundled by esbuild
# into static/bundle/: one file per module a page loads by URL (the console,
# kiosk and watch pages, each console's protocol module, the panels), with
# what two of them share split into chunks, so each module still runs once
# per page and keeps its state (the protocol module a page imports by URL
# shares the page's chunks). A VNC console page then asks the browser's
# cache for 11 of our files instead of 18, and its first pixels come about
# 20 ms sooner (docs/performance.md). console-early.js is copied as it is
# and left out of the bundle: the page loads it first, async, with no
# imports, and the bundled modules import that same file for its early
# websocket.
bundle=$static/bundle
clean $bundle
cp $static/app/console-early.js $bundle/
(cd $static/app && go tool esbuild "${bundled[@]}" --bundle --splitting --format=esm \
	--chunk-names='chunk-[hash]' --external:./console-early.js \
	--log-level=warning --outdir=../bundle)
# The stylesheet: static/app/app.css imports one file per concern, in the
# cascade's order; esbuild inlines them into one, bundle/app.css, which
# every page loads (one request, as before the split).
(cd $static/app && go tool esbuild app.css --bundle --log-level=warning --outfile=../bundle/app.css)

# xterm.js: the self-contained ESM builds (no imports, no bundler needed) and
# the stylesheet. Source maps are left out: they only serve devtools.
xterm=$nm/@xterm
clean $static/xterm
cp $xterm/xterm/lib/xterm.mjs $xterm/xterm/css/xterm.css $static/xterm/
cp $xterm/xterm/LICENSE $static/xterm/LICENSE
cp $xterm/addon-fit/lib/addon-fit.mjs $static/xterm/
cp $xterm/addon-fit/LICENSE $static/xterm/LICENSE.addon-fit
cp $xterm/addon-attach/lib/addon-attach.mjs $static/xterm/
cp $xterm/addon-attach/LICENSE $static/xterm/LICENSE.addon-attach

# IronRDP: two self-contained ES modules (the Svelte-built web component and
# the wasm-bindgen RDP backend) and the backend's wasm.
iron=$nm/@devolutions
clean $static/ironrdp
cp $iron/iron-remote-desktop/iron-remote-desktop.js $static/ironrdp/
# The backend's wasm-bindgen glue carries its wasm as a data: URL, which
# Chromium decodes and compiles again on every visit. It is taken out into
# its own content-hashed file next to the glue, and the glue is pointed at
# it (new URL(..., import.meta.url)), so the glue's own init fetches it and
# compiles it with WebAssembly.instantiateStreaming: the HTTP cache keeps
# the bytes and Chromium's code cache the compiled module.
node - $iron/iron-remote-desktop-rdp/iron-remote-desktop-rdp.js $static/ironrdp <<'JS'
const fs = require("fs");
const path = require("path");
const crypto = require("crypto");
const [src, dir] = process.argv.slice(2);
const js = fs.readFileSync(src, "utf8");
const fail = (why) => {
	console.error(`assets: ${src}: ${why}; the IronRDP backend changed shape, so scripts/assets.sh must learn its new one`);
	process.exit(1);
};
const inlined = [...js.matchAll(/(["'`])data:application\/wasm;base64,([A-Za-z0-9+/]+={0,2})\1/g)];
if (inlined.length !== 1) fail(`found ${inlined.length} inlined data:application/wasm URLs, want exactly 1`);
// The glue must fetch a URL it is given and compile the response as it
// streams in; otherwise pointing it at a file gains nothing.
for (const need of ["WebAssembly.instantiateStreaming", "instanceof URL", "fetch("]) {
	if (!js.includes(need)) fail(`its wasm-bindgen init has no ${need}`);
}
const m = inlined[0];
const wasm = Buffer.from(m[2], "base64");
if (wasm.length < 1024 || wasm.readUInt32BE(0) !== 0x0061736d) fail("the inlined data: URL is not a wasm module");
const name = `ironrdp.${crypto.createHash("sha256").update(wasm).digest("hex").slice(0, 16)}.wasm`;
fs.writeFileSync(path.join(dir, name), wasm);
const out = js.slice(0, m.index) + `new URL(${JSON.stringify("./" + name)}, import.meta.url)` + js.slice(m.index + m[0].length);
if (out.includes("data:application/wasm")) fail("a data:application/wasm URL is left after the rewrite");
fs.writeFileSync(path.join(dir, path.basename(src)), out);
console.error(`assets: ironrdp: ${name} (${(wasm.length / 1048576).toFixed(1)} MiB) taken out of ${path.basename(src)} (${(js.length / 1048576).toFixed(1)} -> ${(out.length / 1024).toFixed(0)} KiB)`);
JS
licence $iron/iron-remote-desktop $static/ironrdp/LICENSE.iron-remote-desktop
licence $iron/iron-remote-desktop-rdp $static/ironrdp/LICENSE.iron-remote-desktop-rdp

# asciinema-player: the self-contained bundle (a classic script defining the
# global AsciinemaPlayer, its terminal emulator's wasm inlined) and its
# stylesheet, for the admin's playback of terminal recordings.
ascii=$nm/asciinema-player
clean $static/asciinema
cp $ascii/dist/bundle/asciinema-player.min.js $ascii/dist/bundle/asciinema-player.css $static/asciinema/
licence $ascii $static/asciinema/LICENSE

# Check, without a browser, that every module a page loads resolves inside
# the copied tree: each entry exists and exports what the pages use, and every
# import reachable from it is a relative path to a copied file (a bare
# specifier like "@xterm/xterm" would need an import map and fails here).
node - "$static" "${bundled[@]}" <<'JS'
const fs = require("fs");
const path = require("path");
const [root, ...bundled] = process.argv.slice(2);

// entry -> export names the portal's pages use.
const entries = {
	"novnc/rfb.js": ["default"],
	"xterm/xterm.mjs": ["Terminal"],
	"xterm/addon-fit.mjs": ["FitAddon"],
	"xterm/addon-attach.mjs": ["AttachAddon"],
	"ironrdp/iron-remote-desktop.js": ["default", "ConfigBuilder"],
	"ironrdp/iron-remote-desktop-rdp.js": ["init", "Backend"],
	"bundle/console-vnc.js": ["open", "preload", "wsURL"],
	"bundle/console-rdp.js": ["open", "preload"],
	"bundle/console-xterm.js": ["open"],
};
// Every bundled module is an entry; the protocol modules above are also
// checked for what the console pages call.
for (const f of bundled) entries[`bundle/${f}`] ??= [];
const others = ["xterm/xterm.css", "asciinema/asciinema-player.min.js", "asciinema/asciinema-player.css", "bundle/app.css"];

const staticImport = /(?:^|[;}\s])(?:import|export)\s*(?:[\w$*{}\s,]*?\s*from\s*)?["']([^"'\n]+)["']/g;
const dynamicImport = /\bimport\(\s*["']([^"'\n]+)["']\s*\)/g;

function specifiers(src) {
	const out = [];
	for (const re of [staticImport, dynamicImport]) {
		for (const m of src.matchAll(re)) out.push(m[1]);
	}
	return out;
}

function exportsOf(src) {
	const names = new Set();
	for (const m of src.matchAll(/\bexport\s*\{([^}]*)\}/g)) {
		for (const part of m[1].split(",")) {
			const name = part.trim().split(/\s+as\s+/).pop().trim();
			if (name) names.add(name);
		}
	}
	for (const m of src.matchAll(/\bexport\s+(?:async\s+)?(?:class|function\*?|const|let|var)\s+([\w$]+)/g)) names.add(m[1]);
	if (/\bexport\s+default\b/.test(src)) names.add("default");
	return names;
}

const errors = [];
for (const f of others) {
	if (!fs.existsSync(path.join(root, f))) errors.push(`${f}: missing`);
}
// The RDP backend loads its wasm from one content-hashed file beside it.
const wasms = fs.readdirSync(path.join(root, "ironrdp")).filter((f) => /^ironrdp\.[0-9a-f]{16}\.wasm$/.test(f));
if (wasms.length !== 1) {
	errors.push(`ironrdp/: ${wasms.length} ironrdp.<hash>.wasm files, want 1`);
} else if (!fs.readFileSync(path.join(root, "ironrdp/iron-remote-desktop-rdp.js"), "utf8").includes(`"./${wasms[0]}"`)) {
	errors.push(`ironrdp/iron-remote-desktop-rdp.js: does not load ./${wasms[0]}`);
}
let modules = 0;
for (const [entry, want] of Object.entries(entries)) {
	const client = entry.split("/")[0];
	const file = path.join(root, entry);
	if (!fs.existsSync(file)) { errors.push(`${entry}: missing`); continue; }
	const have = exportsOf(fs.readFileSync(file, "utf8"));
	for (const name of want) {
		if (!have.has(name)) errors.push(`${entry}: no export ${name} (has ${[...have].join(", ")})`);
	}
	const seen = new Set();
	const queue = [entry];
	while (queue.length) {
		const rel = queue.pop();
		if (seen.has(rel)) continue;
		seen.add(rel);
		const src = fs.readFileSync(path.join(root, rel), "utf8");
		for (const spec of specifiers(src)) {
			if (!spec.startsWith("./") && !spec.startsWith("../")) {
				errors.push(`${rel}: imports "${spec}", which a browser cannot resolve without an import map`);
				continue;
			}
			const target = path.posix.normalize(path.posix.join(path.posix.dirname(rel), spec));
			if (target.split("/")[0] !== client) {
				errors.push(`${rel}: imports "${spec}" outside ${client}/`);
			} else if (!fs.existsSync(path.join(root, target))) {
				errors.push(`${rel}: imports "${spec}" -> ${target}, which is not copied`);
			} else {
				queue.push(target);
			}
		}
	}
	modules += seen.size;
}
if (errors.length) {
	console.error("assets: broken browser modules:\n  " + errors.join("\n  "));
	process.exit(1);
}
console.error(`assets: ok (${modules} modules reachable from ${Object.keys(entries).length} entries)`);
JS
