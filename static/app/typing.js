import { isChord } from './fullscreen.js';

// The bar's Typing toggle (⌨ desktop / ⌨ page) says where the keyboard's keys go — into the
// desktop (its screen has the focus) or to the page — and switches it, so
// a keyboard user always sees, and can change with Enter, whether their
// keys are the desktop's (WCAG 2.1.2); Ctrl+Alt+Shift does the same
// without looking (fullscreen.js).

// SHOWN remembers, for the browser tab, that its user moves by keyboard.
const SHOWN = 'corral-typing-shown';

// attachTyping wires button to screen, the element the console draws in.
// The toggle shows once the user moves by keyboard (Tab, or the chord):
// a pointer user clicks into and out of the desktop, and the bar keeps
// its room for them.
export function attachTyping(button, screen) {
  const reveal = () => {
    button.hidden = false;
    sessionStorage.setItem(SHOWN, '1');
  };
  if (sessionStorage.getItem(SHOWN)) reveal();
  window.addEventListener('keydown', (ev) => {
    if (button.hidden && (ev.key === 'Tab' || isChord(ev))) reveal();
  }, true);
  let wasIn = false; // where the keys went before the button took the focus
  const inDesktop = () => screen.contains(document.activeElement);
  const where = button.querySelector('.typing-where');
  const show = () => {
    const on = inDesktop();
    where.textContent = on ? 'desktop' : 'page';
    button.setAttribute('aria-label', `Typing: ${where.textContent}`);
    button.setAttribute('aria-pressed', String(on));
  };
  screen.addEventListener('focusin', show);
  // The focus leaves before it lands: read where it went once it has.
  screen.addEventListener('focusout', () => setTimeout(show));
  // A pointer on the button takes the focus from the desktop before the
  // click: remember whether it was there.
  button.addEventListener('pointerdown', () => { wasIn = inDesktop(); });
  button.addEventListener('keydown', () => { wasIn = false; });
  button.addEventListener('click', () => {
    if (wasIn) {
      wasIn = false;
      show(); // the keys stay with the page, here on the button
      return;
    }
    giveKeys(screen);
    show();
  });
  show();
}

// giveKeys gives the keyboard's keys to the desktop drawn in screen: the
// focus goes to where its console reads them.
export function giveKeys(screen) {
  screen.querySelector('textarea, canvas')?.focus();
}
