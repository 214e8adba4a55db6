// Serial console and terminal: xterm.js with the fit and attach addons over
// the portal's websocket relay. Keystrokes go as text frames (the attach
// addon's way); the portal turns them into bytes. A resize is one text frame
// holding exactly {"type":"resize","cols":C,"rows":R}, which the portal
// gives to a terminal's pty and drops for a serial line (see relay/terminal.go).
// Selecting text copies it (to the clipboard panel, and to the device's
// clipboard when the browser lets the page); pasting pastes. The pool's
// clipboard policy is applied here, in the page only: the bytes of a paste
// cannot be told from typing (see README, "Clipboard and file transfer").
import { wsURL, dropped } from './console-vnc.js';
import { errorText } from './connect.js';

// The portal chooses VIEW_ONLY for a console that joined another's view
// only, REFUSED for one it refuses (it then says why in one message and
// closes), else CONSOLE (relay.SubprotocolViewOnly, SubprotocolRefused,
// SubprotocolConsole).
const CONSOLE = 'corral-vdi.console';
const VIEW_ONLY = 'corral-vdi.view-only';
const REFUSED = 'corral-vdi.refused';
const names = { serial: 'serial console', terminal: 'terminal' };

// asset returns a hashed asset URL from the page, or the unhashed path the
// static handler also serves (pages that do not list the xterm files).
function asset(screen, key, path) {
  return screen.dataset[key] || `/static/${path}`;
}

function loadCSS(href) {
  if (document.querySelector(`link[data-xterm-css]`)) return;
  const link = document.createElement('link');
  link.rel = 'stylesheet';
  link.href = href;
  link.dataset.xtermCss = '';
  document.head.append(link);
}

// refusal asks the portal, before dialing, whether it would refuse the
// console's websocket (a plain GET of its URL, which changes nothing): a
// browser cannot read why a handshake was refused, only that the
// connection was lost. It returns the portal's words and whether trying
// again by itself may help, or null to dial.
async function refusal(path) {
  const res = await fetch(path, { headers: { Accept: 'application/json' }, cache: 'no-store' }).catch(() => null);
  if (!res || res.ok) return null; // unreachable: the websocket says so
  const body = await res.json().catch(() => ({}));
  return { text: errorText(res.status, body), retry: res.status >= 500 };
}

export async function open(screen, info, ui) {
  loadCSS(asset(screen, 'xtermCss', 'xterm/xterm.css'));
  const [{ Terminal }, { FitAddon }, { AttachAddon }, refused] = await Promise.all([
    import(asset(screen, 'xterm', 'xterm/xterm.mjs')),
    import(asset(screen, 'xtermFit', 'xterm/addon-fit.mjs')),
    import(asset(screen, 'xtermAttach', 'xterm/addon-attach.mjs')),
    refusal(info.websocket),
  ]);
  if (refused) {
    ui.lost(refused.text, false, refused.retry, true);
    return null;
  }
  const box = document.createElement('div');
  box.className = 'xterm-box';
  box.dataset.testid = 'xterm';
  box.style.cssText = 'position:absolute;inset:0;padding:4px;background:#000';
  screen.append(box);
  // Beside the holder (an invitee), the holder's window sets the
  // terminal's size, and a view-only viewer's keys stay in the page (the
  // portal drops them too).
  const term = new Terminal({ cursorBlink: true, fontSize: 15, scrollback: 5000, convertEol: false, disableStdin: !!info.viewOnly });
  const fit = new FitAddon();
  term.loadAddon(fit);
  term.open(box);
  fit.fit();

  // The portal chooses VIEW_ONLY when this console joined another's, view
  // only: an admin's serial console while another admin's holds the line.
  const ws = new WebSocket(wsURL(info.websocket), [CONSOLE, VIEW_ONLY, REFUSED]);
  const notice = document.getElementById('line-notice'); // the console page's, not a shared page's
  ws.binaryType = 'arraybuffer';
  let closing = false;
  const sendSize = () => {
    if (ws.readyState === WebSocket.OPEN && !info.beside) {
      ws.send(JSON.stringify({ type: 'resize', cols: term.cols, rows: term.rows }));
    }
  };
  ws.addEventListener('open', () => {
    if (ws.protocol === REFUSED) { // what the preflight could not foresee
      ws.addEventListener('message', (ev) => {
        let body = {};
        try { body = JSON.parse(ev.data); } catch { /* errorText says the status */ }
        closing = true;
        ui.lost(errorText(body.status, body), false, body.status >= 500, true);
      }, { once: true });
      return;
    }
    const watching = info.viewOnly || ws.protocol === VIEW_ONLY;
    term.options.disableStdin = watching;
    term.loadAddon(new AttachAddon(ws, { bidirectional: !watching }));
    sendSize();
    const who = info.credentials ? ` — log in as ${info.credentials.username}, password ${info.credentials.password}` : '';
    ui.say(ws.protocol === VIEW_ONLY ? 'Connected, view only' : `Connected${who}`, 'ok');
    if (notice && ws.protocol === VIEW_ONLY) {
      notice.textContent = `Another admin has this ${names[info.protocol] || 'console'} open, and it takes one client: you watch theirs, view only. Connect again once they have closed it to type in it.`;
      notice.hidden = false;
    }
    screen.dataset.credentials = info.credentials ? `${info.credentials.username}:${info.credentials.password}` : '';
    if (info.protocol === 'serial' && !info.beside && !watching) ws.send('\r'); // a fresh login prompt; earlier output is gone
    term.focus();
  });
  ws.addEventListener('close', (ev) => {
    if (notice) notice.hidden = true;
    if (closing) return;
    const final = ev.code === 1001 && ev.reason !== 'session ended' && !ev.reason.startsWith('taken over');
    ui.lost(ev.reason || (ev.code === 1000 ? 'The console closed.' : 'The connection was lost.'), final, dropped(ev.code, ev.reason));
  });
  term.onResize(sendSize);
  const policy = info.console || {};
  const toDesktop = policy.clipboard !== 'off' && policy.clipboard !== 'from-desktop';
  const fromDesktop = policy.clipboard !== 'off' && policy.clipboard !== 'to-desktop';
  const refuse = (ev) => { ev.preventDefault(); ev.stopImmediatePropagation(); };
  if (!toDesktop) box.addEventListener('paste', refuse, true);
  if (!fromDesktop) box.addEventListener('copy', refuse, true);
  term.onSelectionChange(() => {
    const text = term.getSelection();
    if (text && fromDesktop) ui.clipboard?.(text);
  });
  const observer = new ResizeObserver(() => fit.fit());
  observer.observe(box);
  screen.xterm = term; // for tests and the devtools
  return {
    keys: terminalKeys(term),
    clipboard: { send: (text) => term.paste(text) },
    close() {
      closing = true;
      if (notice) notice.hidden = true;
      observer.disconnect();
      ws.close();
      term.dispose();
    },
  };
}

// Bytes a terminal expects for the keys the on-screen keyboard sends by name.
const seq = { Enter: '\r', Backspace: '\x7f', Tab: '\t', Escape: '\x1b', Delete: '\x1b[3~', Home: '\x1b[H', End: '\x1b[F' };
const arrows = { ArrowUp: 'A', ArrowDown: 'B', ArrowRight: 'C', ArrowLeft: 'D' };

// terminalKeys types into the terminal as if on its keyboard: xterm.js's
// input() sends through the same path as real keystrokes.
function terminalKeys(term) {
  return {
    text(s) { term.input(s.replaceAll('\n', '\r')); },
    // typable: any printable character (the shell reads UTF-8), Tab and
    // newlines; other control characters could do anything.
    typable: (ch) => ch === '\n' || ch === '\t' || !/[\p{Cc}]/u.test(ch),
    key(name, { ctrl, alt } = {}) {
      let data = name;
      if (name in arrows) data = (term.modes.applicationCursorKeysMode ? '\x1bO' : '\x1b[') + arrows[name];
      else if (name in seq) data = seq[name];
      else if (ctrl && name.length === 1) data = String.fromCharCode(name.toUpperCase().charCodeAt(0) & 0x1f);
      if (alt) data = '\x1b' + data;
      term.input(data);
    },
  };
}
