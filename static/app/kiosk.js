// The kiosk page: one desktop full-screen for thin clients. It reuses the
// console page's protocol modules and reconnect backoff (connect.js),
// reconnects by itself whenever the connection or the desktop goes away,
// and shows a small overlay (reconnect, release, special keys) on
// Ctrl+Alt+Shift+K.
import { attachKeysMenu } from './specialkeys.js';
import { consoleModules, errorText, fetchConnect, pageConnect, pickOption, preloadConsole, Reconnector } from './connect.js';
import { dropEarly } from './console-early.js';
import { desktopDown, desktopState, downWords, fresh, startAgain } from './down.js';

const screen = document.getElementById('screen');
const status = document.getElementById('kiosk-status');
const overlay = document.getElementById('kiosk-overlay');
const message = document.getElementById('kiosk-message');
const modules = consoleModules(screen);
preloadConsole(screen, modules);

const again = new Reconnector(() => connect());
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

// hintOnce shows, on the first connection of the page, how to reach the
// kiosk's menu, for a few seconds (the kiosk has no other chrome).
let hinted = false;
function hintOnce() {
  const hint = document.getElementById('kiosk-hint');
  if (hinted || !hint) return;
  hinted = true;
  hint.hidden = false;
  setTimeout(() => { hint.hidden = true; }, 5000);
}

const ui = {
  say(text, kind) {
    show(text, kind);
    screen.dataset.connected = kind === 'ok' ? 'true' : 'false';
    if (kind === 'ok') {
      again.reset();
      hintOnce();
    }
  },
  // lost: final means the desktop is no longer this kiosk's (released,
  // reclaimed): a reload claims a new one instead of reconnecting. A
  // kiosk retries every other loss: nobody is there to press a button.
  lost(text, isFinal = false) {
    screen.dataset.connected = 'false';
    if (isFinal) {
      final = true;
      again.cancel();
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
  const wait = again.schedule((s) => {
    const again = `Reconnecting in ${s} s…`;
    show(`${text} ${again}`, 'error', `The desktop is not reachable. ${again}`);
  });
  screen.dataset.reconnectIn = String(wait);
}

// desktopURL is the desktop API's address of the kiosk's desktop.
const desktopURL = () => screen.dataset.connect.replace(/\/connect(\?.*)?$/, '');

// startIfDown starts the kiosk's desktop again (fresh, when its pool is
// ephemeral) when it stopped (crashed, stopped by an admin), as a thin
// client relaunches its session: the one at the kiosk has nothing to wait
// for. It reports whether it did, and connected once it had.
async function startIfDown() {
  const url = desktopURL();
  const d = await desktopDown(url);
  if (!d) return false;
  show(`${downWords(d).title}. ${fresh(d) ? 'Getting a fresh one' : 'Starting it again'}…`, 'busy');
  const failed = await startAgain(url, d);
  if (failed) ui.lost(failed);
  else connect();
  return true;
}

// waitWhileStarting reports whether the kiosk's desktop is starting (the
// claim answers before a VM boots), and then asks again in a moment.
async function waitWhileStarting() {
  const d = await desktopState(desktopURL());
  if (d?.power !== 'starting') return false;
  show('Your desktop is starting…', 'busy');
  again.after(1000);
  return true;
}

async function connect() {
  again.cancel();
  current?.close();
  current = null;
  ui.say('Connecting…', 'busy');
  const { ok, status: code, info: body } = pageConnect() || await fetchConnect(screen.dataset.connect);
  if (!ok) dropEarly();
  if (code === 0) {
    schedule('The portal cannot be reached.');
    return;
  }
  if (!ok && code === 503 && (await waitWhileStarting() || await startIfDown())) return;
  if (!ok) {
    // Not ours any more (403) or gone (404): claim anew. Else wait it out.
    ui.lost(errorText(code, body), code === 403 || code === 404);
    return;
  }
  const info = { ...pickOption(body), console: body.console };
  if (info.protocol !== 'vnc') dropEarly(); // the early socket guessed wrong
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
    current?.keys?.release?.(); // the hotkey's modifiers reached the desktop
    toggleOverlay();
  } else if (ev.key === 'Escape' && !overlay.hidden) {
    ev.preventDefault();
    ev.stopPropagation();
    toggleOverlay(false);
  }
}, true);

// The overlay's special keys go to the desktop once the overlay is closed,
// so that they reach the window that had the focus.
attachKeysMenu(null, document.getElementById('kiosk-keys'), () => {
  toggleOverlay(false);
  return current;
}, (text) => show(text, 'error'));

document.getElementById('kiosk-close').addEventListener('click', () => toggleOverlay(false));
document.getElementById('kiosk-reconnect').addEventListener('click', () => {
  toggleOverlay(false);
  again.reset();
  connect();
});
document.getElementById('kiosk-release').addEventListener('click', async (ev) => {
  if (!window.confirm('Release this desktop? Unsaved work in it is lost.')) return;
  final = true;
  again.cancel();
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
