// The notices over the top of the desktop (views/console.templ's and
// views/admin_shadow.templ's .console-notices): each one's × hides it and
// gives the keys back. The click on × takes the focus, and once its
// notice is hidden the focus is on nothing, where the next keys went:
// so it goes back to the field the user was in (a panel's text), else to
// the desktop, over which the notice lay.
import { giveKeys } from './typing.js';

// attachNotices wires the × (data-dismiss) of every notice in box, the
// notices over screen, the element the console draws in.
export function attachNotices(box, screen) {
  let before = null; // the focus before the pointer came down on a ×
  box.addEventListener('pointerdown', (ev) => {
    if (ev.target.closest('[data-dismiss]')) before = document.activeElement;
  });
  box.addEventListener('click', (ev) => {
    const dismiss = ev.target.closest('[data-dismiss]');
    if (!dismiss) return;
    const back = before;
    before = null;
    dismiss.closest('.console-notices > *').hidden = true;
    if (back?.isConnected && back !== document.body && !box.contains(back) && !screen.contains(back)) back.focus();
    else giveKeys(screen);
  });
}
