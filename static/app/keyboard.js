// On-screen keyboard for phones and tablets: the Keyboard button opens a row
// with an input (focusing it opens the device's own keyboard) and the keys
// phones lack (Esc, Tab, Ctrl, Alt, arrows). What is typed goes to the open
// console through its keys interface, { text(s), key(name, mods) }, where
// name is a KeyboardEvent key name ("Enter", "ArrowUp", "a") and mods is
// { ctrl, alt }. Ctrl and Alt stay held for the next key, as on a phone's
// terminal app. Nothing typed stays in the input.

// Keys sent by name rather than as text.
const named = new Set(['Enter', 'Backspace', 'Tab', 'Escape', 'Delete', 'Home', 'End',
  'ArrowLeft', 'ArrowUp', 'ArrowRight', 'ArrowDown']);

// attachKeyboard wires the button and the row; target returns the open
// console's keys interface, or undefined when the console cannot take keys.
export function attachKeyboard(button, row, target) {
  const input = row.querySelector('input');
  const held = { Control: false, Alt: false };
  const show = (key, on) => row.querySelector(`[data-key=${key}]`)?.setAttribute('aria-pressed', String(on));

  function send(name) {
    const keys = target();
    if (!keys) return;
    const mods = { ctrl: held.Control, alt: held.Alt };
    if (name.length > 0 && !named.has(name) && !mods.ctrl && !mods.alt) keys.text(name);
    else keys.key(name, mods);
    for (const k of Object.keys(held)) {
      held[k] = false;
      show(k, false);
    }
  }
  const sendText = (text) => { for (const ch of text || '') send(ch); };

  function open(on) {
    row.hidden = !on;
    button.setAttribute('aria-pressed', String(on));
    if (on) input.focus();
  }
  button.addEventListener('click', () => open(row.hidden));
  // A tap on a key must not take the focus from the input: that would close
  // the device's keyboard.
  row.addEventListener('pointerdown', (ev) => {
    if (ev.target.closest('button')) ev.preventDefault();
  });
  row.addEventListener('click', (ev) => {
    const b = ev.target.closest('button[data-key]');
    if (!b) return;
    const k = b.dataset.key;
    if (k in held) {
      held[k] = !held[k];
      show(k, held[k]);
    } else {
      send(k);
    }
    input.focus();
  });
  // Hardware and desktop keyboards report named keys on keydown; phones
  // often report "Unidentified" there and say what happened on beforeinput.
  input.addEventListener('keydown', (ev) => {
    if (named.has(ev.key)) {
      ev.preventDefault();
      send(ev.key);
    }
  });
  input.addEventListener('beforeinput', (ev) => {
    switch (ev.inputType) {
      case 'insertText':
      case 'insertReplacementText':
        sendText(ev.data);
        break;
      case 'insertLineBreak':
      case 'insertParagraph':
        send('Enter');
        break;
      case 'deleteContentBackward':
        send('Backspace');
        break;
      case 'insertCompositionText':
        return; // a word being composed arrives whole at compositionend
    }
    ev.preventDefault();
  });
  input.addEventListener('compositionend', (ev) => {
    sendText(ev.data);
    input.value = '';
  });
}
