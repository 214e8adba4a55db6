// The console page: asks the portal which console to open for this desktop
// and hands the screen to that protocol's module. Each module exports
// `open(screen, info, ui)`, where info is the /connect answer's chosen
// option and ui has say(text, kind) and lost(); it returns { close() } and,
// when the console takes typed keys, keys (see keyboard.js).
import { watchReclaim } from './reclaim.js';
import { attachKeyboard } from './keyboard.js';

const screen = document.getElementById('screen');
const status = document.getElementById('status');
const reconnect = document.getElementById('reconnect');

// Protocol modules by name; their URLs are hashed, so the page lists them.
const modules = {
  vnc: screen.dataset.moduleVnc,
  rdp: screen.dataset.moduleRdp,
  serial: screen.dataset.moduleXterm,
  terminal: screen.dataset.moduleXterm,
};

const ui = {
  say(text, kind) {
    status.textContent = text;
    status.dataset.kind = kind || '';
    screen.dataset.connected = kind === 'ok' ? 'true' : 'false';
  },
  // lost reports a connection that ended; final means the desktop is no
  // longer the user's (released, reclaimed), so reconnecting cannot help.
  lost(text, final = false) {
    ui.say(text, 'error');
    reconnect.hidden = final;
    document.getElementById('home').hidden = !final;
  },
};

async function connectInfo() {
  const res = await fetch(screen.dataset.connect, { headers: { Accept: 'application/json' } });
  const body = await res.json().catch(() => ({}));
  if (!res.ok) {
    throw new Error([body.error || `The portal answered ${res.status}.`, body.hint].filter(Boolean).join(' '));
  }
  return body;
}

let current = null;

const names = { rdp: 'RDP', vnc: 'VNC', serial: 'serial console', terminal: 'terminal' };

// showFallbacks offers the other consoles of the desktop as links.
function showFallbacks(options) {
  const box = document.getElementById('fallbacks');
  box.replaceChildren(...options.map((o) => {
    const a = document.createElement('a');
    a.href = `?protocol=${encodeURIComponent(o.protocol)}`;
    a.textContent = `Use ${names[o.protocol] || o.protocol}`;
    a.className = 'button';
    a.dataset.testid = `fallback-${o.protocol}`;
    return a;
  }));
}

async function connect() {
  reconnect.hidden = true;
  current?.close();
  current = null;
  ui.say('Connecting…', 'busy');
  let info;
  try {
    info = await connectInfo();
  } catch (err) {
    ui.lost(err.message);
    return;
  }
  // ?protocol=vnc picks one of the offered fallbacks instead of the best.
  const wanted = new URLSearchParams(window.location.search).get('protocol');
  const offered = [info, ...(info.fallbacks || [])];
  info = offered.find((o) => o.protocol === wanted) || info;
  showFallbacks(offered.filter((o) => o.protocol !== info.protocol));
  const url = modules[info.protocol];
  if (!url) {
    ui.lost(`This desktop offers ${info.protocol}, which this page cannot show.`);
    return;
  }
  screen.replaceChildren();
  const mod = await import(url);
  current = await mod.open(screen, info, ui);
  keyboard.disabled = !current?.keys;
  keyboard.title = current?.keys ? "Type with this device's on-screen keyboard"
    : `The on-screen keyboard does not reach ${names[info.protocol]} consoles yet; use VNC for typing from a phone.`;
}

reconnect.addEventListener('click', connect);

// Narrow screens fold the controls into a menu; choosing one closes it.
const toggle = document.getElementById('menu-toggle');
const controls = document.getElementById('console-controls');
function menu(open) {
  controls.dataset.open = String(open);
  toggle.setAttribute('aria-expanded', String(open));
}
toggle.addEventListener('click', () => menu(controls.dataset.open !== 'true'));
controls.addEventListener('click', (ev) => {
  if (ev.target.closest('button, a')) menu(false);
});

const keyboard = document.getElementById('keyboard');
attachKeyboard(keyboard, document.getElementById('osk'), () => current?.keys);

watchReclaim(document.getElementById('reclaim'), screen.dataset.desktop);
document.getElementById('fullscreen').addEventListener('click', () => {
  screen.requestFullscreen?.();
});
connect();
