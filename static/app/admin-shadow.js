// A console opened beside its holder's: an admin watching, or a user the
// holder invited. The VNC module, or the terminal module for the holder's
// terminal or serial console, with input off unless the page gives
// control (the relay drops a view-only viewer's input either way), and
// the console page's ended card when it closes.
import { Reconnector, errorText } from './connect.js';
import { attachEnded, capitalised } from './ended.js';
import { pollViewers, sayParticipants } from './watchers.js';
import { attachRequestControl } from './request-control.js';
import { attachNotices } from './notices.js';

const screen = document.getElementById('screen');
const status = document.getElementById('status');
const ended = attachEnded(document.getElementById('ended'));
let current = null;
const again = new Reconnector(() => watch());
// grant, once the holder allowed a request for control, opens the next
// screen connection with control; it is spent by that connection (a
// reconnect later watches again, view only).
let grant = null;
let viewing = false; // the open console is the screen, view only
const badge = document.querySelector('[data-testid=share-role]');
const badgeText = badge.textContent;
const heading = document.querySelector('[data-testid=desktop-name]');
const headingText = heading.textContent;
attachNotices(document.querySelector('.console-notices'), screen);
const offerControl = attachRequestControl(document.getElementById('request-control'), document.getElementById('control-notice'), screen.dataset.holder, (g) => {
  grant = g;
  watch();
});

const ui = {
  say(text, kind) {
    status.textContent = text;
    status.dataset.kind = kind || '';
    screen.dataset.connected = kind === 'ok' ? 'true' : 'false';
    if (kind === 'ok') {
      again.reset();
      ended.hide();
    }
    offerControl(kind === 'ok' && viewing);
  },
  // lost: final means it will not come back (revoked, released, ended by
  // the portal), so the card offers the way home; a drop (retry: the
  // network, a restart, the desktop closing a viewer that joined as its
  // size changed) reconnects by itself with backoff; else Reconnect.
  lost(text, final = false, retry = false, refused = false) {
    // The holder handed control over or took it back: the page reopens
    // with the new role (the portal names it in the close reason).
    if (text.startsWith('Role changed: ')) {
      ui.say(text.slice('Role changed: '.length), 'busy');
      location.reload();
      return;
    }
    ui.say(capitalised(text), 'error'); // as the ended card says it
    if (retry && !final) {
      ended.show('retry', text);
      const said = capitalised(text);
      again.schedule((s) => ended.countdown(`${said} Reconnecting in ${s} s…`));
      return;
    }
    ended.show(final ? 'ended' : (refused ? 'refused' : 'lost'), text);
  },
};

async function watch() {
  again.cancel();
  ended.hide();
  current?.close();
  current = null;
  ui.say('Connecting…', 'busy');
  const res = await fetch(screen.dataset.connect, { headers: { Accept: 'application/json' } }).catch(() => null);
  const info = res ? await res.json().catch(() => ({})) : {};
  if (!res || !res.ok) {
    ui.lost(res ? errorText(res.status, info) : 'The portal cannot be reached.', res?.status === 403);
    return;
  }
  // The console the link names (?protocol=terminal: the holder's
  // terminal), else the screen where there is one, else the terminal or
  // serial console the holder has open (a container's only console).
  const all = [info, ...(info.fallbacks || [])];
  const asked = new URLSearchParams(location.search).get('protocol');
  const opt = all.find((o) => o.protocol === asked) || all.find((o) => o.protocol === 'vnc') ||
    all.find((o) => o.protocol === 'terminal' || o.protocol === 'serial');
  if (!opt) {
    ui.lost('This desktop has no console to watch.', true);
    return;
  }
  const mod = await import(opt.protocol === 'vnc' ? screen.dataset.moduleVnc : screen.dataset.moduleXterm);
  const viewOnly = screen.dataset.viewOnly !== 'false';
  if (grant && opt.protocol === 'vnc') {
    const url = new URL(opt.websocket, location.href);
    url.searchParams.set('control', grant);
    viewing = false;
    badge.textContent = 'control';
    heading.textContent = headingText.replace(/^Watching /, 'Helping on ');
    current = await mod.open(screen, { ...opt, websocket: url.pathname + url.search, viewOnly: false, beside: true }, ui);
  } else {
    viewing = viewOnly && opt.protocol === 'vnc';
    badge.textContent = badgeText;
    heading.textContent = headingText;
    current = await mod.open(screen, { ...opt, asks: info.asks, viewOnly, beside: true }, ui);
  }
  grant = null;
}

// A narrow screen folds the badge, who is on the desktop and Request
// control into Menu (app.css); choosing one closes it.
const more = document.getElementById('watch-more');
const menuButton = document.getElementById('watch-menu');
function menu(open) {
  more.dataset.open = String(open);
  menuButton.setAttribute('aria-expanded', String(open));
}
menuButton.addEventListener('click', () => menu(more.dataset.open !== 'true'));
more.addEventListener('click', (ev) => {
  if (ev.target.closest('button')) menu(false);
});

document.getElementById('reconnect').addEventListener('click', watch);
watch();

// Who else is on the desktop, live: the holder, invitees, admins.
const participants = document.getElementById('participants');
if (screen.dataset.viewers) {
  pollViewers(screen.dataset.viewers, (list) => {
    participants.textContent = sayParticipants(screen.dataset.holder, screen.dataset.me, list);
    participants.title = participants.textContent;
    participants.hidden = !participants.textContent;
  });
}
