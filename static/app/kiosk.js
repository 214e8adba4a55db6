// The kiosk page: one desktop full-screen for thin clients. It reuses the
// console page's protocol modules (open(screen, info, ui) -> { close }),
// reconnects by itself with backoff when the connection or the desktop
// goes away, and shows a small overlay (reconnect, release) on
// Ctrl+Alt+Shift+K.
const screen = document.getElementById('screen');
const status = document.getElementById('kiosk-status');
const overlay = document.getElementById('kiosk-overlay');
const message = document.getElementById('kiosk-message');

const modules = {
  vnc: screen.dataset.moduleVnc,
  rdp: screen.dataset.moduleRdp,
  serial: screen.dataset.moduleXterm,
  terminal: screen.dataset.moduleXterm,
};

// Backoff after a lost connection: 1 s doubling up to 30 s.
const BACKOFF_MIN_MS = 1000;
const BACKOFF_MAX_MS = 30000;
let delay = BACKOFF_MIN_MS;
let timer = null;
let current = null;
let final = false;

// show puts a short line on the screen and the full text in the overlay.
function show(text, kind, short = text) {
  status.textContent = short;
  status.dataset.kind = kind || '';
  status.hidden = kind === 'ok';
  message.textContent = text;
}

const ui = {
  say(text, kind) {
    show(text, kind);
    screen.dataset.connected = kind === 'ok' ? 'true' : 'false';
    if (kind === 'ok') delay = BACKOFF_MIN_MS;
  },
  // lost: final means the desktop is no longer this kiosk's (released,
  // reclaimed): a reload claims a new one instead of reconnecting.
  lost(text, isFinal = false) {
    screen.dataset.connected = 'false';
    if (isFinal) {
      final = true;
      show(`${text} Getting a new desktop…`, 'error');
      clearTimeout(timer);
      timer = setTimeout(() => window.location.reload(), 5000);
      return;
    }
    schedule(text);
  },
};

function schedule(text) {
  if (final) return;
  clearTimeout(timer);
  const wait = delay;
  delay = Math.min(delay * 2, BACKOFF_MAX_MS);
  const again = `Reconnecting in ${Math.round(wait / 1000)} s…`;
  show(`${text} ${again}`, 'error', `The desktop is not reachable. ${again}`);
  screen.dataset.reconnectIn = String(wait);
  timer = setTimeout(connect, wait);
}

async function connect() {
  clearTimeout(timer);
  current?.close();
  current = null;
  ui.say('Connecting…', 'busy');
  const res = await fetch(screen.dataset.connect, { headers: { Accept: 'application/json' } }).catch(() => null);
  if (!res) {
    schedule('The portal cannot be reached.');
    return;
  }
  let info = await res.json().catch(() => ({}));
  if (!res.ok) {
    const text = [info.error || `The portal answered ${res.status}.`, info.hint].filter(Boolean).join(' ');
    // Not ours any more (403) or gone (404): claim anew. Else wait it out.
    ui.lost(text, res.status === 403 || res.status === 404);
    return;
  }
  const wanted = new URLSearchParams(window.location.search).get('protocol');
  info = [info, ...(info.fallbacks || [])].find((o) => o.protocol === wanted) || info;
  const url = modules[info.protocol];
  if (!url) {
    ui.lost(`This desktop offers ${info.protocol}, which a kiosk cannot show.`, false);
    return;
  }
  screen.replaceChildren();
  const mod = await import(url);
  current = await mod.open(screen, info, ui);
}

function toggleOverlay(open = overlay.hidden) {
  overlay.hidden = !open;
  if (open) {
    document.getElementById('kiosk-reconnect').focus();
  } else {
    screen.querySelector('canvas')?.focus();
  }
}

// Capture phase: the hotkey never reaches the desktop.
window.addEventListener('keydown', (ev) => {
  if (ev.ctrlKey && ev.altKey && ev.shiftKey && ev.code === 'KeyK') {
    ev.preventDefault();
    ev.stopPropagation();
    toggleOverlay();
  } else if (ev.key === 'Escape' && !overlay.hidden) {
    ev.preventDefault();
    ev.stopPropagation();
    toggleOverlay(false);
  }
}, true);

document.getElementById('kiosk-close').addEventListener('click', () => toggleOverlay(false));
document.getElementById('kiosk-reconnect').addEventListener('click', () => {
  toggleOverlay(false);
  delay = BACKOFF_MIN_MS;
  connect();
});
document.getElementById('kiosk-release').addEventListener('click', async (ev) => {
  if (!window.confirm('Release this desktop? Unsaved work in it is lost.')) return;
  final = true;
  current?.close();
  const res = await fetch(ev.currentTarget.dataset.url, { method: 'POST', headers: { Accept: 'application/json' } }).catch(() => null);
  if (!res || !res.ok) {
    final = false;
    show('The desktop could not be released; try again.', 'error');
    return;
  }
  window.location.reload(); // claims a fresh desktop for the next user
});

connect();
