// Input methods (Japanese, Chinese, a phone's word suggestions) on the
// consoles whose clients read keys on a canvas, where no input method
// composes: the browser hands composed text only to an editable element.
// So the desktop's keys go to a textarea over the screen instead, from
// which the client still takes them as keys (AltGr and dead keys
// included); text an input method commits into it is typed into the
// desktop with the console's keys (keysyms on VNC, see vncKeys; Unicode
// events or the chosen layout's scan codes on RDP, see rdpKeys), and the
// textarea is emptied again.

import { shown } from './clipboard.js';

// MAX_TEXT bounds what an input method may type in one second, in
// characters: it commits a word or a sentence at a time, never thousands;
// a flood beyond it (a page or an extension firing composition events) is
// dropped, and the user told so. What it commits is typed at once, so that
// a key pressed after it (Enter) arrives after it.
export const MAX_TEXT = 2000;

// attachIME appends to parent (stage, or a shadow root inside it) a
// textarea and types what an input method commits there with keys
// (text(s), typable(ch), who()), unless blocked() (a view-only console);
// what could not be typed is said in a note over the screen (stage) for a
// few seconds. The keys of a composition stop at stage: they are the
// input method's, not the desktop's, which the client would send as
// their physical keys. It returns the textarea.
function attachIME(stage, parent, keys, blocked) {
  const note = document.createElement('div');
  note.className = 'console-note';
  note.dataset.testid = 'console-keys-note';
  note.setAttribute('role', 'status');
  note.hidden = true;
  stage.append(note);
  let hiding = 0;
  const say = (text) => {
    note.textContent = text;
    note.hidden = false;
    clearTimeout(hiding);
    hiding = setTimeout(() => { note.hidden = true; }, 8000);
  };
  const ime = document.createElement('textarea');
  ime.className = 'console-ime';
  ime.dataset.testid = 'console-ime';
  ime.setAttribute('aria-label', 'Keys to the desktop');
  ime.setAttribute('autocomplete', 'off');
  ime.setAttribute('autocapitalize', 'off');
  ime.spellcheck = false;
  // A tap on the desktop must not open a phone's keyboard: the Keyboard
  // button does that (keyboard.js).
  ime.inputMode = 'none';
  parent.append(ime);
  const composing = (ev) => {
    if (ev.isComposing || ev.keyCode === 229) ev.stopImmediatePropagation();
  };
  stage.addEventListener('keydown', composing, true);
  stage.addEventListener('keyup', composing, true);

  let since = 0; // the start of this second
  let typed = 0; // characters typed since
  // commit types the textarea's text and empties it.
  function commit() {
    const chars = [...ime.value].map((ch) => (ch === '\r' ? '\n' : ch));
    ime.value = '';
    if (chars.length === 0 || blocked()) return;
    const now = performance.now();
    if (now - since > 1000) [since, typed] = [now, 0];
    const room = Math.max(0, MAX_TEXT - typed);
    if (chars.length > room) say(`The input method sent more than ${MAX_TEXT} characters in a second; the rest was not typed.`);
    const go = chars.slice(0, room);
    typed += go.length;
    const bad = go.filter((ch) => !keys.typable(ch));
    keys.text(go.filter((ch) => keys.typable(ch)).join(''));
    if (bad.length > 0) say(`Not typed: ${keys.who?.() || "this console's keyboard"} cannot type ${[...new Set(bad)].slice(0, 4).map(shown).join(', ')}.`);
  }
  ime.addEventListener('compositionend', commit);
  ime.addEventListener('input', (ev) => { if (!ev.isComposing) commit(); });
  return ime;
}

// vncIME points noVNC's keyboard at the textarea attachIME appends to
// stage, typing committed text with keys (vncKeys). It must run before
// rfb connects (noVNC listens from then on). It returns the textarea.
export function vncIME(rfb, stage, keys) {
  const ime = attachIME(stage, stage, keys, () => rfb.viewOnly);
  // noVNC 1.7 (pinned in package.json) listens on its Keyboard's _target
  // from connect on, and focuses its canvas on a click and on focus().
  rfb._keyboard._target = ime;
  rfb.focus = (options) => ime.focus(options);
  // A click would focus the canvas (noVNC makes it focusable) after
  // noVNC's own handler has focused the textarea.
  stage.addEventListener('mousedown', (ev) => {
    if (ev.target.tagName !== 'CANVAS') return;
    ev.preventDefault();
    if (rfb.focusOnClick) ime.focus({ preventScroll: true });
  }, true);
  stage.addEventListener('focusin', (ev) => {
    if (ev.target.tagName === 'CANVAS') ime.focus({ preventScroll: true });
  });
  return ime;
}

// rdpIME gives IronRDP's <iron-remote-desktop> el (in stage) the
// textarea, typing committed text with keys (rdpKeys). IronRDP takes the
// window's key events while the focus is inside its element (the page
// sees el as the focused element), so the textarea goes in el's shadow
// root, beside its canvas, and takes the focus whenever the canvas gets
// it (IronRDP focuses it when the pointer comes in, a click does too).
// app.css does not reach into the shadow root: its look is set here. It
// returns the textarea.
export function rdpIME(el, stage, keys) {
  const ime = attachIME(stage, el.shadowRoot, keys, () => false);
  Object.assign(ime.style, {
    position: 'absolute', left: '0', bottom: '0', width: '1px', height: '1px', padding: '0', border: '0',
    opacity: '0', resize: 'none', overflow: 'hidden', pointerEvents: 'none', caretColor: 'transparent',
  });
  el.shadowRoot.addEventListener('focusin', (ev) => {
    if (ev.target.tagName === 'CANVAS') ime.focus({ preventScroll: true });
  });
  return ime;
}
