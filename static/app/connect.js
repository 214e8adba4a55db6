// Shared by the console page and the kiosk: which module shows which
// console protocol, how to ask the portal which console to open, and the
// backoff between reconnects.

// consoleModules maps a protocol to its module's URL; the URLs are hashed,
// so the page lists them on the screen element.
export function consoleModules(screen) {
  return {
    vnc: screen.dataset.moduleVnc,
    rdp: screen.dataset.moduleRdp,
    serial: screen.dataset.moduleXterm,
    terminal: screen.dataset.moduleXterm,
  };
}

// preloadConsole starts loading the console the page will most likely open
// (the URL's ?protocol=, else the one the portal named in data-likely)
// while the page asks /connect: its module and, through the module's
// preload(screen), its client (noVNC's modules; IronRDP's, with its wasm
// fetched and compiled now rather than after the answer). A wrong guess
// costs a download; a failure shows when the console opens.
export function preloadConsole(screen, modules) {
  const likely = new URLSearchParams(window.location.search).get('protocol') || screen.dataset.likely;
  const url = modules[likely];
  if (!url) return;
  import(url).then((m) => m.preload?.(screen)).catch(() => {});
}

// pageConnect returns, once, the /connect answer the console page came
// with (views.ConsoleProps.Connect: a VNC console), in fetchConnect's
// shape, or null: the page then asks (and asks again on a reconnect).
export function pageConnect() {
  const el = document.getElementById('connect-answer');
  if (!el) return null;
  el.remove();
  try {
    return { ok: true, status: 200, info: JSON.parse(el.textContent) };
  } catch {
    return null;
  }
}

// fetchConnect asks the portal which console to open. It resolves to
// { ok, status, info } where info is the /connect answer (or the error
// body), and to { ok: false, status: 0 } when the portal cannot be reached.
export async function fetchConnect(url) {
  const res = await fetch(url, { headers: { Accept: 'application/json' } }).catch(() => null);
  if (!res) return { ok: false, status: 0, info: {} };
  const info = await res.json().catch(() => ({}));
  return { ok: res.ok, status: res.status, info };
}

// errorText is an error body of the portal's API ({"error", "hint"}) as
// one sentence with its hint; status names what answered without one.
export function errorText(status, body) {
  return [body.error || `The portal answered ${status}.`, body.hint].filter(Boolean).join(' ');
}

// pickOption returns the offered console the URL's ?protocol= asks for,
// else the portal's best.
export function pickOption(info) {
  const wanted = new URLSearchParams(window.location.search).get('protocol');
  return [info, ...(info.fallbacks || [])].find((o) => o.protocol === wanted) || info;
}

// CONSENT_S is how long the portal waits for a holder's answer to a watch
// (handlers' consentWait).
export const CONSENT_S = 60;

// waitForConsent says, each second, that the console waits for holder to
// allow it, and how long it may still wait; it returns a stop.
export function waitForConsent(ui, holder) {
  const until = Date.now() + CONSENT_S * 1000;
  const say = () => {
    const left = Math.max(0, Math.ceil((until - Date.now()) / 1000));
    ui.say(`Waiting for ${holder} to allow (${left} s)…`, 'busy');
  };
  say();
  const timer = setInterval(say, 1000);
  return () => clearInterval(timer);
}

// Backoff after a lost connection: 1 s doubling up to 30 s.
export const BACKOFF_MIN_MS = 1000;
export const BACKOFF_MAX_MS = 30000;

// Reconnector runs connect again after a loss, waiting longer each time
// until a connection holds. schedule(onTick) starts the wait and calls
// onTick(seconds) each second so the page can show it; reset() after a
// good connection; cancel() stops a wait.
export class Reconnector {
  constructor(connect) {
    this.connect = connect;
    this.delay = BACKOFF_MIN_MS;
    this.timer = null;
    this.ticker = null;
  }

  // schedule waits and reconnects; it returns the wait in milliseconds.
  schedule(onTick = () => {}) {
    this.cancel();
    const wait = this.delay;
    this.delay = Math.min(this.delay * 2, BACKOFF_MAX_MS);
    const until = Date.now() + wait;
    const tick = () => onTick(Math.max(0, Math.ceil((until - Date.now()) / 1000)));
    tick();
    this.ticker = setInterval(tick, 1000);
    this.timer = setTimeout(() => {
      this.cancel();
      this.connect();
    }, wait);
    return wait;
  }

  // after reconnects after ms, keeping the backoff as it is: a desktop
  // that is starting is asked again at a steady pace.
  after(ms) {
    this.cancel();
    this.timer = setTimeout(() => {
      this.cancel();
      this.connect();
    }, ms);
  }

  cancel() {
    clearTimeout(this.timer);
    clearInterval(this.ticker);
    this.timer = this.ticker = null;
  }

  reset() {
    this.delay = BACKOFF_MIN_MS;
  }
}
