// The clipboard panel of the console page: it shows the desktop's latest
// clipboard, sends its text to the desktop, and types it as keystrokes for
// consoles without a clipboard (KubeVirt VNC, login screens, BIOS, serial
// lines). The open console's module offers clipboard.send(text) and keys
// (see keyboard.js) with typable(ch) and an optional interval (ms per
// character); the page hands the desktop's text to received(text).
// The pool's policy comes with /connect as info.console.clipboard; the
// portal enforces it for VNC, this panel only follows it.

import { attachPictures } from './clipboard-image.js';

// MAX_SEND bounds a clipboard send, in UTF-8 bytes: a terminal websocket
// takes messages up to 64 KiB, and the VNC relay cuts text at 256 KiB.
export const MAX_SEND = 60 * 1024;
// MAX_KEYS bounds paste-as-keys, in characters (at 50 a second: minutes).
export const MAX_KEYS = 10000;
// MAX_SHOWN bounds the desktop text shown; the VNC relay cuts at 256 KiB.
const MAX_SHOWN = 256 * 1024;

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// shown returns a character as the user can read it in a refusal.
export function shown(ch) {
  const cp = ch.codePointAt(0);
  const hex = `U+${cp.toString(16).toUpperCase().padStart(4, '0')}`;
  return /\p{Cc}|\p{Cf}|\s/u.test(ch) ? hex : `"${ch}" (${hex})`;
}

// reason is why a send failed, in words: an Error's message, a string,
// or (IronRDP throws its own error objects) their backtrace's first line;
// never an object's "[object Object]".
export function reason(err) {
  let text = '';
  if (typeof err === 'string') text = err;
  else if (typeof err?.message === 'string') text = err.message;
  else if (typeof err?.backtrace === 'function') text = String(err.backtrace()).split('\n')[0];
  text = text.trim().replace(/[.!]+$/, '');
  return text && text !== '[object Object]' ? text : 'the console refused it';
}

// attachClipboard wires the panel; target returns the open console's
// module result, or undefined; alternative returns { name, href } of a
// console of the desktop that has a clipboard, or null.
export function attachClipboard(toggle, panel, target, alternative) {
  const $ = (id) => panel.querySelector(`#${id}`);
  const text = $('clipboard-text');
  const note = $('clipboard-note');
  const send = $('clipboard-send');
  const asKeys = $('paste-as-keys');
  const row = $('paste-progress-row');
  const bar = $('paste-progress');
  const status = $('paste-status');
  const cancel = $('paste-cancel');
  let policy = { clipboard: 'both' };
  let typing = null; // { cancelled } while paste-as-keys runs

  const say = (msg, kind = '') => { note.textContent = msg; note.dataset.kind = kind; };
  const toDesktop = () => policy.clipboard !== 'off' && policy.clipboard !== 'from-desktop';
  const fromDesktop = () => policy.clipboard !== 'off' && policy.clipboard !== 'to-desktop';
  const pictures = attachPictures(panel, say, () => ({ toDesktop: toDesktop(), fromDesktop: fromDesktop() }));

  // offer shows a link to a console with a clipboard (or hides it).
  function offer(better) {
    let link = panel.querySelector('[data-testid=clipboard-better]');
    if (!better) { if (link) link.hidden = true; return; }
    if (!link) {
      link = Object.assign(document.createElement('a'), { className: 'button' });
      link.dataset.testid = 'clipboard-better';
      note.after(link);
    }
    link.hidden = false;
    link.href = better.href;
    link.textContent = `Use ${better.name}`;
  }

  function open(on) {
    panel.hidden = !on;
    toggle.setAttribute('aria-pressed', String(on));
    if (on) text.focus();
  }
  toggle.addEventListener('click', () => open(panel.hidden));
  $('clipboard-close').addEventListener('click', () => open(false));

  // refresh sets what the buttons can do for the open console and policy,
  // and with explain says so in the note.
  function refresh(explain = false) {
    const c = target();
    send.disabled = !c?.clipboard || !toDesktop() || Boolean(typing);
    asKeys.disabled = !c?.keys?.typable || !toDesktop() || Boolean(typing);
    pictures();
    if (!explain) return;
    const ways = { both: 'both ways', 'to-desktop': 'to the desktop only', 'from-desktop': 'from the desktop only', off: 'off' };
    if (policy.clipboard !== 'both') {
      say(`This pool's policy: clipboard ${ways[policy.clipboard] || 'off'}.`, 'warn');
    } else if (!c) {
      say('Not connected.');
    } else {
      const better = c.clipboard ? null : alternative?.();
      say(c.clipboard ? 'Text copied in the desktop shows here; Send puts this text on its clipboard.'
        : `This console has no clipboard: Type as keys types the text${better ? `, or use ${better.name}, which has one` : ''}.`);
      offer(better);
    }
  }

  send.addEventListener('click', async () => {
    const c = target();
    const value = text.value;
    const bytes = new TextEncoder().encode(value).length;
    if (bytes > MAX_SEND) {
      say(`Too long to send: ${bytes} bytes; the clipboard carries at most ${MAX_SEND}.`, 'error');
      return;
    }
    try {
      await c.clipboard.send(value);
      say(`Sent ${[...value].length} characters to the desktop's clipboard.`, 'ok');
    } catch (err) {
      say(`The desktop's clipboard did not take it: ${reason(err)}. Try again, or use Type as keys.`, 'error');
    }
  });

  asKeys.addEventListener('click', () => typeAsKeys(target(), text.value.replace(/\r\n?/g, '\n')));
  cancel.addEventListener('click', () => { if (typing) typing.cancelled = true; });

  async function typeAsKeys(c, value) {
    const keys = c?.keys;
    if (!keys?.typable) return;
    const chars = [...value];
    if (chars.length > MAX_KEYS) {
      say(`Too long to type: ${chars.length} characters; paste-as-keys types at most ${MAX_KEYS}.`, 'error');
      return;
    }
    const bad = [...new Set(chars.filter((ch) => !keys.typable(ch)))];
    if (bad.length > 0) {
      const list = bad.slice(0, 8).map(shown).join(', ') + (bad.length > 8 ? `, and ${bad.length - 8} more` : '');
      const who = keys.who?.() || "this console's keyboard";
      const other = c.layouts ? ", or choose the desktop's layout in Keys" : '';
      say(`Nothing typed: ${who} cannot type ${list}. Remove ${bad.length > 1 ? 'them' : 'it'}${other}${c.clipboard ? ', or use Send' : ''}.`, 'error');
      return;
    }
    typing = { cancelled: false };
    const job = typing;
    refresh();
    row.hidden = false;
    bar.max = chars.length;
    const interval = keys.interval || 20;
    let i = 0;
    for (; i < chars.length && !job.cancelled && target() === c; i++) {
      keys.text(chars[i]);
      bar.value = i + 1;
      status.textContent = `Typing ${i + 1} of ${chars.length}…`;
      await sleep(interval);
    }
    typing = null;
    row.hidden = true;
    if (i === chars.length) say(`Typed ${i} characters.`, 'ok');
    else say(`Stopped after ${i} of ${chars.length} characters${job.cancelled ? '' : ': the console closed'}.`, 'warn');
    refresh();
  }

  // received shows the desktop's clipboard and, when the browser lets the
  // page, puts it on this device's clipboard too. Text being edited in the
  // panel is not overwritten: the desktop's shows when the box is left.
  let shownText = '';
  let held = null;
  text.addEventListener('blur', () => {
    if (held !== null) {
      const v = held;
      held = null;
      received(v);
    }
  });
  function received(value) {
    if (!fromDesktop()) return;
    let v = String(value);
    let extra = '';
    if (v.length >= MAX_SHOWN) {
      v = v.slice(0, MAX_SHOWN);
      extra = ` It was cut to ${MAX_SHOWN} characters.`;
    }
    if (document.activeElement === text && text.value !== shownText) {
      held = v;
      say("The desktop copied new text; it shows here when you leave this box.", 'warn');
      return;
    }
    // Binary or invalid text from a guest: show control characters as such.
    const clean = v.replace(/[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f]/g, '\ufffd');
    if (clean !== v) extra += ' Characters that are not text show as \ufffd.';
    text.value = shownText = clean;
    panel.dataset.received = String(Date.now());
    say(`The desktop's clipboard (${[...clean].length} characters).${extra}`, extra ? 'warn' : 'ok');
    if (document.hasFocus()) navigator.clipboard?.writeText(clean).catch(() => {});
  }

  // With the browser's permission (never asked for), text copied on this
  // device goes to the desktop when the page gets the focus back.
  let last = '';
  window.addEventListener('focus', async () => {
    const c = target();
    if (!c?.clipboard || !toDesktop()) return;
    const perm = await navigator.permissions?.query({ name: 'clipboard-read' }).catch(() => null);
    if (perm?.state !== 'granted') return;
    const v = await navigator.clipboard.readText().catch(() => '');
    if (v && v !== last && new TextEncoder().encode(v).length <= MAX_SEND) {
      last = v;
      text.value = v;
      c.clipboard.send(v);
    }
  });

  return {
    received,
    // connected tells the panel which console is open and the policy.
    connected(p) {
      policy = { ...p, clipboard: p?.clipboard || 'both' };
      refresh(true);
    },
  };
}
