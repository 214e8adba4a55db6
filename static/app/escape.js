// Esc closes the console page's open panels (Clipboard, Share, Files, the
// Keys list, the connection's details) and gives the keyboard back to the control that opened them,
// as any dialog does. Keys typed in the desktop are the desktop's: an Esc
// there goes to it.

// Each panel and the button that closes it (a toggle closes the Keys list).
const panels = [
  ['clipboard-panel', 'clipboard-close', 'clipboard-toggle'],
  ['share-panel', 'share-close', 'share-toggle'],
  ['files-panel', 'files-close', 'files-toggle'],
  ['keys-list', 'keys-menu', 'keys-menu'],
  ['chip-details', 'chip', 'chip'],
];

// attachEscape listens for Esc before the page's other key handlers (the
// full-screen menu's: a panel closes first, then the menu).
export function attachEscape() {
  window.addEventListener('keydown', (ev) => {
    if (ev.key !== 'Escape' || ev.target.closest?.('#screen')) return;
    let back = null;
    for (const [panel, close, toggle] of panels) {
      const el = document.getElementById(panel);
      if (!el || el.hidden) continue;
      document.getElementById(close)?.click();
      back = document.getElementById(toggle);
    }
    if (!back) return;
    ev.preventDefault();
    ev.stopImmediatePropagation();
    back.focus();
  }, true);
}
