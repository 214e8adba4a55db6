// RDP console: IronRDP's <iron-remote-desktop> in the page, speaking
// RDCleanPath to the portal's gateway, which does TLS with the desktop's RDP
// server; NLA runs between this page and the server. The /connect answer
// (info) carries the gateway token, the destination and, for desktops
// whose sign-in the portal knows, the credentials, shown to the holder.
import { physicalKeysNote, wsURL } from './console-vnc.js';
import { rdpClipboard, rdpSpecial } from './console-rdp-extras.js';
import { rdpFiles } from './console-rdp-files.js';
import { rdpKeys, withSession } from './console-rdp-keys.js';
import { rdpIME } from './ime.js';
import { layout } from './keys-layout.js';
import { rdpTouch } from './console-rdp-touch.js';
import { attachRDPSize } from './console-rdp-size.js';
import { attachZoom } from './zoom.js';
import { closeWords, watchClose } from './console-rdp-close.js';

// IronErrorKind values of @devolutions/iron-remote-desktop.
const kinds = { General: 0, WrongPassword: 1, LogonFailure: 2, AccessDenied: 3, RDCleanPath: 4, ProxyConnect: 5, NegotiationFailure: 6 };

const wrongPassword = 'Wrong user name or password.';

let loading; // the IronRDP module's load, started once per page

// loadIronRDP imports IronRDP and initialises it: the backend's init
// fetches its wasm (a file of its own, long cached) and compiles it as it
// streams in, which Chromium's code cache then keeps for the next visit.
// Callers share one load; a failed one is tried again by the next.
function loadIronRDP(screen) {
  if (!loading) {
    const load = (async () => {
      const t0 = performance.now();
      const [, mod] = await Promise.all([
        import(screen.dataset.ironrdp), // defines <iron-remote-desktop>
        import(screen.dataset.ironrdpBackend),
      ]);
      const t1 = performance.now();
      performance.measure('rdp-import', { start: t0, end: t1 });
      await mod.init('WARN');
      performance.measure('rdp-wasm', { start: t1 });
      return mod;
    })();
    loading = load;
    load.catch(() => { if (loading === load) loading = null; });
  }
  return loading;
}

// preload starts loading IronRDP ahead of open (connect.js), so that its
// wasm compiles while the page waits for /connect.
export function preload(screen) {
  loadIronRDP(screen).catch(() => {});
}

// describe turns an IronRDP error into a sentence for the user; wrong says
// whether the credentials were refused. The gateway makes sure a refused
// NLA sign-in reaches IronRDP as a logon failure status.
function describe(err, asks) {
  const kind = typeof err?.kind === 'function' ? err.kind() : undefined;
  const trace = typeof err?.backtrace === 'function' ? err.backtrace() : String(err?.message || err || '');
  if (kind === kinds.WrongPassword || kind === kinds.LogonFailure) return { text: wrongPassword, wrong: true };
  if (kind === kinds.AccessDenied) return { text: 'The desktop refused this user.', wrong: true };
  if (kind === kinds.NegotiationFailure) {
    return { text: `The desktop's RDP server refused the connection's security settings (${trace.split('\n')[0]}).` };
  }
  const d = typeof err?.rdcleanpathDetails === 'function' ? err.rdcleanpathDetails() : undefined;
  if (d) {
    switch (d.httpStatusCode) {
      case 401: return { text: 'The connection token expired. Press Reconnect.' };
      case 403: return { text: 'The portal refused the connection: the token is not valid for you and this desktop. Press Reconnect.' };
      case 400: case 413: return { text: 'The portal refused the RDP request as malformed.' };
      // The pool asks the holder's consent (watch: consent): refused, or no answer in time.
      case 409: return { text: `${asks || 'The holder'} did not allow the watch.` };
    }
    if (d.wsaErrorCode || d.httpStatusCode === 502) {
      return { text: 'The desktop\'s RDP server is not reachable. Try VNC, or stop and start the desktop.' };
    }
    if (d.tlsAlertCode) return { text: `TLS with the desktop's RDP server failed (alert ${d.tlsAlertCode}).` };
  }
  return { text: `The RDP connection failed: ${trace.split('\n')[0] || 'unknown error'}.` };
}

// signInPanel shows the desktop's sign-in (when the portal knows it) and a
// form to use other credentials; submit(user, password) connects. A quiet
// panel (kiosk screens, seen by passers-by) shows the known password only
// when the user must act on it.
function signInPanel(creds, submit, quiet) {
  const panel = document.createElement('form');
  panel.className = 'rdp-signin';
  panel.dataset.testid = 'rdp-signin';
  Object.assign(panel.style, {
    position: 'absolute', top: '0.5rem', right: '0.5rem', zIndex: 10, display: 'flex', gap: '0.4rem',
    alignItems: 'center', padding: '0.4rem 0.6rem', background: 'rgba(20, 28, 38, 0.92)', color: '#e8eef4',
    borderRadius: '6px', font: '13px system-ui, sans-serif',
  });
  const known = document.createElement('span');
  known.dataset.testid = 'rdp-credentials';
  const user = Object.assign(document.createElement('input'), { name: 'username', placeholder: 'User name', autocomplete: 'username', size: 12 });
  const pass = Object.assign(document.createElement('input'), { name: 'password', type: 'password', placeholder: 'Password', autocomplete: 'current-password', size: 16 });
  user.dataset.testid = 'rdp-username';
  pass.dataset.testid = 'rdp-password';
  const go = Object.assign(document.createElement('button'), { type: 'submit', textContent: 'Connect' });
  go.dataset.testid = 'rdp-connect';
  const fields = document.createElement('span');
  fields.style.display = 'contents';
  fields.append(user, pass, go);
  panel.append(known, fields);
  if (creds) {
    known.textContent = `Sign in as ${creds.username}, password ${creds.password}`;
    user.value = creds.username;
    pass.value = creds.password;
  }
  panel.addEventListener('submit', (ev) => {
    ev.preventDefault();
    submit(user.value, pass.value);
  });
  return {
    el: panel,
    // ask shows the form (no known sign-in, or it was refused).
    ask() { fields.style.display = 'contents'; panel.hidden = false; pass.focus(); },
    // busy hides the form while a connection runs.
    busy() { fields.style.display = 'none'; panel.hidden = !creds || quiet; },
    // signedIn hides the panel: the sign-in is spent, the desktop is the user's to see.
    signedIn() { panel.hidden = true; },
  };
}

export async function open(screen, info, ui) {
  ui.say('Loading the RDP client…', 'busy');
  // Timings (performance measures "rdp-load", "rdp-connect") say where the
  // wait goes: the client's wasm, or the connection.
  const t0 = performance.now();
  const mod = await loadIronRDP(screen);
  performance.measure('rdp-load', { start: t0 });
  screen.style.position = 'relative';
  const el = document.createElement('iron-remote-desktop');
  el.setAttribute('scale', 'fit');
  el.setAttribute('flexcenter', 'true');
  el.style.display = 'block';
  el.style.width = '100%';
  el.style.height = '100%';
  const ready = new Promise((resolve) => {
    el.addEventListener('ready', (ev) => resolve(ev.detail.irgUserInteraction), { once: true });
  });
  let session; // the connected IronRDP session, for keys not typed on the canvas
  el.module = withSession(mod.Backend, (s) => { session = s; });
  const unicode = Boolean(info.caps?.unicode);
  const keys = rdpKeys(mod.Backend, () => session, unicode, layout);

  const url = wsURL(info.websocket);

  let closed = false;
  let irgui;
  const panel = signInPanel(info.credentials, (u, p) => start(u, p), screen.dataset.kiosk === 'true');
  screen.append(el, panel.el);
  const touch = rdpTouch(el, mod.Backend, () => session);
  const zoom = attachZoom(screen, el, {
    mode: 'transform', canvas: () => el.shadowRoot?.querySelector('canvas'), tap2: touch.tap2, scroll: touch.scroll,
  });
  irgui = await ready;
  irgui.setScale(1); // fit the session into the window
  // An input method's text (Japanese, Chinese) goes as the keys' text:
  // Unicode events, or the chosen layout's keys (which refuse the rest).
  rdpIME(el, screen, keys);
  const size = attachRDPSize(irgui, screen, () => el.shadowRoot?.querySelector('canvas'), { keeps: info.caps?.resize === false });
  const policy = info.console || { clipboard: 'both', fileTransfer: true };
  const clipboard = rdpClipboard(irgui, policy, ui);
  const files = policy.fileTransfer ? rdpFiles(mod, irgui, screen, ui) : null;

  let attempts = 0;
  async function start(username, password) {
    panel.busy();
    ui.say(info.asks ? `Waiting for ${info.asks} to allow your console…` : 'Connecting…', 'busy');
    // A retry with other credentials gets a fresh token: the first may
    // have expired while the user typed.
    if (attempts++ > 0) {
      try {
        const res = await fetch(screen.dataset.connect, { headers: { Accept: 'application/json' } });
        const body = await res.json();
        const fresh = [body, ...(body.fallbacks || [])].find((o) => o.protocol === 'rdp');
        if (res.ok && fresh) info.token = fresh.token;
      } catch { /* keep the old token; the gateway says if it expired */ }
    }
    const cfg = irgui.configBuilder()
      .withUsername(username)
      .withPassword(password)
      .withDestination(info.destination)
      .withProxyAddress(url)
      .withAuthToken(info.token)
      .withServerDomain('')
      .withDesktopSize(size.desktopSize());
    // Display control lets a server that can resize take the window's
    // size, or the one chosen (console-rdp-size.js); others keep theirs
    // and are scaled.
    if (typeof mod.displayControl === 'function') cfg.withExtension(mod.displayControl(true));
    const config = cfg.build();
    let socketClosed;
    const closedOnce = new Promise((resolve) => { socketClosed = resolve; });
    const unwatch = watchClose(url, socketClosed);
    let started;
    const t1 = performance.now();
    try {
      started = await irgui.connect(config);
      performance.measure('rdp-connect', { start: t1 });
    } catch (err) {
      unwatch();
      if (closed) return;
      const d = describe(err, info.asks);
      ui.lost(d.text);
      if (d.wrong) panel.ask();
      // A token is good for one connection attempt window; Reconnect gets
      // a fresh one from /connect.
      return;
    }
    irgui.setVisibility(true);
    panel.signedIn();
    ui.say('Connected', 'ok');
    size.follow(); // a choice made before the session began
    try {
      const end = await started.run();
      const said = await closeWords(closedOnce);
      if (!closed) ui.lost(said?.text || `Disconnected: ${end.reason()}.`, said?.final);
    } catch (err) {
      const said = await closeWords(closedOnce);
      if (!closed) ui.lost(said?.text || describe(err).text, said?.final, !said);
    } finally {
      unwatch();
      session = undefined;
      // IronRDP hides its screen when a session ends; it stays, dimmed,
      // under the ended card (app.css) until a reconnect replaces it.
      if (!closed) irgui.setVisibility(true);
    }
  }

  // Follow the window: the server decides the final size (a shadowed
  // desktop keeps its own), and the client scales it to fit.
  const resized = new ResizeObserver(() => size.follow());
  resized.observe(screen);

  if (info.credentials) {
    start(info.credentials.username, info.credentials.password);
  } else {
    ui.say('Enter the desktop\'s user name and password.', 'busy');
    panel.ask();
  }
  return {
    // A server without a clipboard channel (freerdp-shadow) gets none:
    // the panel says so and offers a console that has one.
    clipboard: info.caps?.clipboard === false ? undefined : clipboard,
    keys,
    zoom,
    special: (combo) => rdpSpecial(irgui, keys, combo),
    // Scan codes: the desktop's layout makes the characters, and Type as
    // keys needs to know it, as on a VM (console-vnc.js). A server that
    // takes Unicode events (Windows) types any character.
    keysNote: () => (unicode ? '' : physicalKeysNote),
    layouts: !unicode,
    close() {
      closed = true;
      zoom.close();
      touch.close();
      files?.close();
      resized.disconnect();
      size.close();
      try { irgui.shutdown(); } catch { /* not connected */ }
      el.remove();
      panel.el.remove();
    },
  };
}
