// The console page: asks the portal which console to open for this desktop
// and hands the screen to that protocol's module. Each module exports
// `open(screen, info, ui)`, where info is the /connect answer's chosen
// option (with the pool's console policy as info.console) and ui has
// say(text, kind), lost(text, final, retry) and clipboard(text) for the
// desktop's clipboard. It returns { close() } and, as the console allows,
// keys (keyboard.js), clipboard { send(text) } and special(combo)
// (specialkeys.js). A connection that drops (retry) reconnects by itself
// with backoff, under a banner.
import { watchReclaim } from './reclaim.js';
import { attachKeyboard } from './keyboard.js';
import { attachClipboard } from './clipboard.js';
import { attachKeysMenu } from './specialkeys.js';
import { consoleModules, errorText, fetchConnect, pageConnect, pickOption, preloadConsole, Reconnector } from './connect.js';
import { attachEnded, capitalised, endedKind, nameLogin, sentence } from './ended.js';
import { attachFullscreen } from './fullscreen.js';
import { watchViewers } from './watchers.js';
import { attachAgentNotice } from './agent-notice.js';
import { attachChip } from './chip.js';
import { dropEarly } from './console-early.js';
import { desktopDown, desktopGone, desktopState, downWords, startAgain } from './down.js';
import { attachTyping } from './typing.js';
import { attachNotices } from './notices.js';
import { attachEscape } from './escape.js';
import { attachFold } from './fold.js';
import { screenNumber, screenSocket } from './vnc-screens.js';

// Timings (performance measures "page-run", "connect-read") say where a
// console's start goes; the first-pixel bench reads them.
performance.measure('page-run');
const screen = document.getElementById('screen');
const status = document.getElementById('status');
const reconnect = document.getElementById('reconnect');
const ended = attachEnded(document.getElementById('ended'));
const modules = consoleModules(screen);
preloadConsole(screen, modules);

// A screen window shows another part of its console window's desktop
// (vnc-screens.js), with a bar of its own that says which.
const screenNo = screenNumber();
if (screenNo) {
  document.body.dataset.screen = String(screenNo);
  const badge = document.createElement('span');
  badge.className = 'screen-badge';
  badge.dataset.testid = 'screen-badge';
  badge.textContent = `Screen ${screenNo}`;
  document.querySelector('.console-name').after(badge);
  document.title = `Screen ${screenNo} · ${document.title}`;
}

let current = null;
const again = new Reconnector(() => connect());

// ROLE_CHANGED starts the close reason of a console whose role the portal
// changed (console.RoleChangedPrefix); the page loads again after
// REJOIN_AFTER_MS, as the new role has it, and retries refusals for
// REJOIN_MS (the holder's console may still be opening).
const ROLE_CHANGED = 'Role changed: ';
const REJOIN_AFTER_MS = 1000;
const REJOIN_MS = 15000;
const REJOIN_KEY = 'corral-vdi-rejoin-until';
const REJOIN_LOGIN_KEY = 'corral-vdi-rejoin-login'; // who the role change named
const rejoinUntil = Number(sessionStorage.getItem(REJOIN_KEY)) || 0;
if (Date.now() < rejoinUntil) nameLogin(sessionStorage.getItem(REJOIN_LOGIN_KEY));
sessionStorage.removeItem(REJOIN_KEY);
sessionStorage.removeItem(REJOIN_LOGIN_KEY);

const ui = {
  say(text, kind) {
    status.textContent = text;
    status.dataset.kind = kind || '';
    screen.dataset.connected = kind === 'ok' ? 'true' : 'false';
    if (kind === 'ok') {
      again.reset();
      chip.again();
      ended.hide();
      clipboard.connected(current?.policy);
    }
  },
  // lost reports a connection that ended; final means the desktop is no
  // longer the user's (released, reclaimed), so reconnecting cannot help;
  // retry means it dropped (network, portal restart) rather than ended.
  // refused means the portal said no before the console connected.
  lost(text, final = false, retry = false, refused = false) {
    // The portal changed this console's role (a holder came for the
    // serial line an admin's own console held): it opens again in the
    // new one, and while the holder's console opens, a refusal is
    // tried again rather than shown as the end.
    if (text.startsWith(ROLE_CHANGED)) {
      const words = text.slice(ROLE_CHANGED.length);
      ui.say(words, 'busy'); // it starts with a login: kept as it is
      sessionStorage.setItem(REJOIN_KEY, String(Date.now() + REJOIN_MS));
      const came = /^(\S+) claimed this desktop/.exec(words); // console.HolderCame
      if (came) sessionStorage.setItem(REJOIN_LOGIN_KEY, came[1]); // the page's refusals may name them
      setTimeout(() => location.reload(), REJOIN_AFTER_MS); // the page as the new role has it
      return;
    }
    if (Date.now() < rejoinUntil) retry = true;
    // The portal's own word for its shutdown, said so a user follows it.
    if (text === 'session ended') text = 'The portal closed the connection; it may be restarting.';
    ui.say(sentence(text), 'error');
    const kind = endedKind(text, final, retry, refused);
    ended.show(kind, text);
    clipboard.connected(current?.policy);
    if (kind === 'retry' || kind === 'lost') whenDown(kind, text);
  },
  clipboard(text) { clipboard.received(text); },
};

// whenDown asks whether a lost console's desktop is down: then the card
// offers its way back (down.js) and nothing reconnects by itself; else a
// drop (retry) reconnects with backoff.
let losses = 0;
async function whenDown(kind, text) {
  const loss = ++losses;
  const d = await desktopDown(screen.dataset.desktop);
  if (loss !== losses) return; // connecting again, or lost again meanwhile
  if (d) {
    ui.say(d.power === 'failed' ? 'Stopped unexpectedly' : 'Stopped', 'error');
    ended.down(downWords(d), async () => {
      ended.busy(d.mode === 'ephemeral' ? 'Getting you a fresh desktop…' : 'Starting your desktop…');
      const failed = await startAgain(screen.dataset.desktop, d);
      if (failed) ended.busy(failed, true);
      else connect();
    });
    return;
  }
  if (await desktopGone(screen.dataset.desktop)) {
    if (loss === losses) ui.lost('This desktop is no longer yours: it was released or reclaimed.', true);
    return;
  }
  if (loss !== losses) return;
  if (kind === 'retry') {
    const said = capitalised(text);
    again.schedule((s) => ended.countdown(`${said} Reconnecting in ${s} s…`));
  }
}

// STARTING_POLL_MS is how often the page asks again while its desktop
// starts.
const STARTING_POLL_MS = 1000;

// waitWhileStarting reports whether the desktop is starting (a claim
// answers as soon as it is won: a VM may still boot), and then says so
// and asks again in a moment, with no error card in between.
async function waitWhileStarting() {
  const loss = losses;
  const d = await desktopState(screen.dataset.desktop);
  if (loss !== losses || d?.power !== 'starting') return false;
  ui.say('Your desktop is starting; its console opens as soon as it runs…', 'busy');
  again.after(STARTING_POLL_MS);
  return true;
}

const names = { rdp: 'RDP', vnc: 'VNC', serial: 'serial console', terminal: 'terminal' };

// showFallbacks offers the other consoles of the desktop as links.
function showFallbacks(options) {
  const box = document.getElementById('fallbacks');
  box.replaceChildren(...options.map((o) => {
    const a = document.createElement('a');
    a.href = `?protocol=${encodeURIComponent(o.protocol)}`;
    // A compact bar drops the "Use" (app.css); the name stays whole.
    const name = names[o.protocol] || o.protocol;
    const use = document.createElement('span');
    use.className = 'use-word';
    use.textContent = 'Use ';
    a.append(use, name);
    a.setAttribute('aria-label', `Use ${name}`);
    a.className = 'button';
    a.dataset.testid = `fallback-${o.protocol}`;
    return a;
  }));
}

async function connect() {
  losses++;
  again.cancel();
  ended.hide();
  ui.say('Connecting…', 'busy');
  const { ok, status: code, info: body } = pageConnect() || await fetchConnect(screen.dataset.connect);
  performance.measure('connect-read');
  if (!ok) {
    dropEarly();
    if (code === 503 && await waitWhileStarting()) return;
    // Unreachable portal: try again; a refusal is the user's to act on.
    ui.lost(code === 0 ? 'The portal cannot be reached.' : errorText(code, body), false, code === 0 || code >= 500);
    return;
  }
  const offered = [body, ...(body.fallbacks || [])];
  const info = { ...pickOption(body), console: body.console, asks: body.asks };
  if (screenNo) {
    if (info.protocol !== 'vnc') {
      ui.lost('Only a VNC console shows a desktop on more than one screen; this desktop offers ' + (names[info.protocol] || info.protocol) + '.', true);
      return;
    }
    info.websocket = screenSocket(info.websocket, screenNo);
    info.screen = screenNo;
  }
  // An admin beside the holder watches, view only, on every console but
  // RDP, which cannot share one and gives them control
  // (handlers.serveConsole, handleRDPSocket): the page takes no
  // keys then, and shows no controls that would send any.
  const { holder, me } = screen.dataset;
  info.viewOnly = Boolean(holder && me && holder !== me && info.protocol !== 'rdp');
  document.body.dataset.viewOnly = String(info.viewOnly);
  if (info.protocol !== 'vnc') dropEarly(); // the early socket guessed wrong
  offeredConsoles = offered;
  screen.dataset.protocol = info.protocol; // the Share panel's links open this console
  showFallbacks(offered.filter((o) => o.protocol !== info.protocol));
  const url = modules[info.protocol];
  if (!url) {
    ui.lost(`This desktop offers ${info.protocol}, which this page cannot show.`);
    return;
  }
  // The ended console goes only now: a reconnect refused (released
  // meanwhile) leaves its last frame under the card.
  current?.close();
  current = null;
  screen.replaceChildren();
  const mod = await import(url);
  current = await mod.open(screen, info, ui);
  if (current) Object.assign(current, { policy: info.console, protocol: info.protocol });
  clipboard.connected(info.console);
  keyboard.disabled = !current?.keys;
  keyboard.title = current?.keys ? "Type with this device's on-screen keyboard"
    : `The on-screen keyboard does not reach ${names[info.protocol]} consoles yet; use VNC for typing from a phone.`;
  keysButton.disabled = !current?.special;
}

reconnect.addEventListener('click', connect);

// A bar whose controls do not fit folds them into a menu (fold.js);
// choosing one closes it. A bar that folds while a control's list is
// open (the Size or Keys list) opens the menu, so that the control and
// its list stay where the user left them, to close as they opened it.
const toggle = document.getElementById('menu-toggle');
const controls = document.getElementById('console-controls');
function menu(open) {
  controls.dataset.open = String(open);
  toggle.setAttribute('aria-expanded', String(open));
}
toggle.addEventListener('click', () => menu(controls.dataset.open !== 'true'));
controls.addEventListener('click', (ev) => {
  if (ev.target.closest('button, a') && !ev.target.closest('#keys-menu, #size-menu')) menu(false);
});
const listOpen = () => [...controls.querySelectorAll('[aria-expanded=true][aria-controls]')]
  .some((b) => controls.contains(document.getElementById(b.getAttribute('aria-controls'))));
attachFold(document.querySelector('.console-bar'), status, (folded) => menu(folded && listOpen()));

const keyboard = document.getElementById('keyboard');
// The on-screen keyboard is for devices without a keyboard of their own.
keyboard.hidden = !(navigator.maxTouchPoints > 0 || window.matchMedia('(any-pointer: coarse)').matches);
attachKeyboard(keyboard, document.getElementById('osk'), () => current?.keys);
let offeredConsoles = [];
const clipboard = attachClipboard(document.getElementById('clipboard-toggle'), document.getElementById('clipboard-panel'), () => current, () => {
  const o = offeredConsoles.find((x) => x.caps?.clipboard && x.protocol !== current?.protocol);
  return o ? { name: names[o.protocol] || o.protocol, href: `?protocol=${encodeURIComponent(o.protocol)}` } : null;
});
const keysButton = document.getElementById('keys-menu');
const keysList = document.getElementById('keys-list');
attachKeysMenu(keysButton, keysList, () => current, (text) => ui.say(text, 'error'));
document.addEventListener('click', (ev) => {
  if (!keysList.hidden && !ev.target.closest('#keys-list, #keys-menu')) keysList.hidden = true;
});

watchReclaim(document.getElementById('reclaim'), screen.dataset.desktop);
watchViewers(document.getElementById('watchers'), screen.dataset.viewers,
  attachAgentNotice(document.getElementById('agent-notice')), screen.dataset.holder, screen.dataset.me);
const chip = attachChip(document.getElementById('chip'), screen.dataset.link, () => (current?.updates?.() ?? 0));
attachEscape();
attachTyping(document.getElementById('typing'), screen);
attachNotices(document.querySelector('.console-notices'), screen);
attachFullscreen(document.getElementById('fullscreen'), document.querySelector('.console-bar'),
  document.getElementById('fs-hint'), () => current?.keys?.release?.());
connect();
