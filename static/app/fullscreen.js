// Full screen for the console page: the page (not only the canvas) goes
// full screen with its bar hidden; Ctrl+Alt+Shift (the kiosk's chord,
// without K) shows the bar as an overlay menu with every console action,
// its first control focused, and again or Esc hides it. A hint says so on
// entering. The chord is read in the capture phase, before the console's
// own key handlers, and the modifiers it pressed are let go in the
// desktop (release()). In a normal window the same chord takes the
// keyboard out of the desktop to the bar's first control (a keyboard user
// is never trapped in the desktop, WCAG 2.1.2), and Esc gives it back.

const HINT_MS = 4000;

// isChord reports whether ev completes Ctrl+Alt+Shift (the last of the three pressed).
export function isChord(ev) {
  return ev.ctrlKey && ev.altKey && ev.shiftKey && ['Control', 'Alt', 'Shift'].includes(ev.key);
}

// attachFullscreen wires button; bar is the console's bar, hint the hint
// element, release() lets go of the desktop's modifiers.
export function attachFullscreen(button, bar, hint, release) {
  const root = document.documentElement;
  let hintTimer;
  const controls = bar.querySelector('.console-controls');
  const menu = (open) => {
    document.body.dataset.menu = String(open);
    controls.dataset.open = String(open); // narrow screens fold the controls
    if (open) {
      controls.querySelector('button:not([hidden]):not(:disabled), a:not([hidden])')?.focus();
    } else if (bar.contains(document.activeElement)) {
      document.activeElement.blur();
      document.querySelector('#screen canvas')?.focus();
    }
  };
  button.addEventListener('click', () => {
    if (document.fullscreenElement) document.exitFullscreen();
    else root.requestFullscreen?.().catch(() => {});
  });
  const what = hint.querySelector('#fs-hint-what');
  const showHint = (text) => {
    if (what) what.textContent = text;
    clearTimeout(hintTimer);
    hint.hidden = false;
    hintTimer = setTimeout(() => { hint.hidden = true; }, HINT_MS);
  };
  document.addEventListener('fullscreenchange', () => {
    const on = Boolean(document.fullscreenElement);
    document.body.dataset.fullscreen = String(on);
    button.textContent = on ? 'Exit full screen' : 'Full screen';
    menu(false);
    clearTimeout(hintTimer);
    hint.hidden = true;
    if (on) showHint('for the menu');
  });
  // A keyboard user who tabs into the desktop is told the way out.
  let tabbed = false;
  document.getElementById('screen')?.addEventListener('focusin', () => {
    if (tabbed && !document.fullscreenElement) showHint('to take the keyboard out of the desktop');
  });
  window.addEventListener('keydown', (ev) => {
    tabbed = ev.key === 'Tab';
    if (isChord(ev)) {
      ev.preventDefault();
      ev.stopPropagation();
      release();
      hint.hidden = true;
      const full = document.body.dataset.fullscreen === 'true';
      menu(full ? document.body.dataset.menu !== 'true' : !bar.contains(document.activeElement));
    } else if (ev.key === 'Escape' && document.body.dataset.menu === 'true'
      && (document.fullscreenElement || bar.contains(document.activeElement))) {
      ev.preventDefault();
      ev.stopPropagation();
      menu(false);
    }
  }, true);
  return { menu };
}
