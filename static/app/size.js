// The console's Size choice (views/console_size.templ): Fit to window (the
// desktop takes the window's size, in whole pixels; a phone's stays 1024
// wide and is shown whole), Actual size (the desktop keeps its size and is shown
// pixel for pixel, scrolled where it is larger than the window), or a
// fixed size (the desktop is made that size and scaled to fit the
// window). A desktop whose server cannot change its size keeps its own:
// Fit and the fixed sizes scale it to the window instead, and the choice's
// words say so. The portal keeps the choice for the user (the page
// carries it in data-size; a change is PUT to data-keep), so it follows
// them to any browser.
import { putSetting } from './settings.js';

// MAX_SIDE is the largest side RFB's SetDesktopSize can carry (16 bits);
// the desktop's server may take less, and says so when asked.
const MAX_SIDE = 65535;

// choiceOf turns a remembered value into a choice: { kind: 'fit' },
// { kind: 'actual' } or { kind: 'fixed', w, h }; anything else is Fit.
export function choiceOf(v) {
  if (v === 'actual') return { kind: 'actual' };
  const m = /^(\d{1,5})x(\d{1,5})$/.exec(v || '');
  if (m) {
    const w = Number(m[1]);
    const h = Number(m[2]);
    if (w > 0 && h > 0 && w <= MAX_SIDE && h <= MAX_SIDE) return { kind: 'fixed', w, h };
  }
  return { kind: 'fit' };
}

// valueOf is the value a choice is remembered and offered by.
export function valueOf(c) {
  return c.kind === 'fixed' ? `${c.w}x${c.h}` : c.kind;
}

// label is a choice's name on the Size button.
export function label(c) {
  if (c.kind === 'screens') return `${c.n} screens`;
  if (c.kind === 'fixed') return `${c.w}×${c.h}`;
  return c.kind === 'actual' ? 'Actual' : 'Fit';
}

// words says what a choice does on a desktop that can (resizable) or
// cannot change its size, on a phone-narrow screen (phone) or not.
export function words(c, resizable, phone) {
  if (c.kind === 'actual') return 'Pixel for pixel: the desktop keeps its size; scroll to see the rest.';
  if (!resizable) return c.kind === 'fit' ? 'Scaled to this window.' : 'This desktop keeps its own size: scaled to this window instead.';
  if (c.kind === 'fixed') return `The desktop is made ${c.w}×${c.h}, scaled to fit this window.`;
  return phone ? 'The desktop stays 1024 wide on this narrow screen, shown whole.' : "The desktop takes this window's size.";
}

// splitWords is the Size list's note on a desktop whose one display is
// split across sc.count windows (sc.split), now its size in words.
function splitWords(sc, now) {
  if (sc.fits()) return `This desktop is ${now}, one display split over ${sc.count} windows: each shows its part. Close the other screen windows to choose a size.`;
  const want = sc.want();
  return `This desktop is ${now}, not ${want ? `${want.w}×${want.h}, ` : ''}your ${sc.count} windows together `
    + "(its server refused that size, or the VM has not taken it yet): each window shows all of it, scaled.";
}

// statusWords are ExtendedDesktopSize's refusals (RFB's status codes).
const statusWords = {
  1: 'its server does not allow resizing',
  2: 'its server has no room for it',
  3: 'its server does not take that size or layout',
};

// attachSize wires the Size button and its list (inside wrap) to a
// console: view is { apply(choice), resizable(), size() } where apply
// makes the console follow a choice, resizable reports whether the
// desktop can change its size, and size returns its size now ({w, h}) or
// null. A console that can show the desktop on more than one screen
// (vnc-size.js) adds screens(), { count, max, can, why, heads, split,
// fits(), want() }: the screens open (its own window counts), whether it
// may add one and, where it may not, why in words (empty on a phone, where
// the row is not shown), whether they are a VM display's heads (each its
// own window's size, so the console's own size is still chosen here),
// whether they split one display (a KubeVirt VM's), whether that display
// has the windows' size together and the size asked for them, and addScreen(),
// which opens one and returns its number (null when the browser blocked
// it); while more than one is open the sizes wait. It returns { changed(),
// refused(choice, status), settled(), close() }: changed when the
// desktop's size or resizability changed (the words follow), refused when
// the desktop refused a fixed size or a layout of screens, settled when it
// took one again.
export function attachSize(wrap, view) {
  if (!wrap) return { changed() {}, refused() {}, settled() {}, close() {} };
  const button = wrap.querySelector('#size-menu');
  const list = wrap.querySelector('#size-list');
  const note = wrap.querySelector('#size-note');
  const notice = document.getElementById('size-notice');
  const screensRow = wrap.querySelector('.size-screens');
  const addScreen = wrap.querySelector('#screen-add');
  const screenWords = wrap.querySelector('#screen-words');
  let blocked = false; // the browser blocked the last screen window
  let choice = choiceOf(wrap.dataset.size);
  // A choice this browser kept for the user before the portal kept them
  // (localStorage) becomes the portal's, once, where the user has none.
  const oldKey = `corral.size.${wrap.dataset.user || ''}`;
  let adopted = null;
  try {
    const old = localStorage.getItem(oldKey);
    localStorage.removeItem(oldKey);
    if (old && !wrap.dataset.size) adopted = choice = choiceOf(old);
  } catch { /* no storage: nothing kept there */ }
  let refusedValue = ''; // a fixed size the desktop refused

  // A remembered size the list does not offer gets an entry of its own
  // while it is the choice.
  const offered = () => [...list.querySelectorAll('input[name=size]')];
  function ensureOffered(c) {
    const v = valueOf(c);
    for (const extra of list.querySelectorAll('label.size-extra')) {
      if (extra.querySelector('input').value !== v) extra.remove();
    }
    if (offered().some((i) => i.value === v)) return;
    const row = list.querySelector('label.size-choice').cloneNode(true);
    row.classList.add('size-extra');
    const input = row.querySelector('input');
    input.value = v;
    input.dataset.testid = `size-${v}`;
    row.querySelector('.size-name').textContent = label(c);
    list.querySelector('.size-choices').append(row);
  }

  function render() {
    const resizable = view.resizable();
    const phone = window.innerWidth < 1024;
    ensureOffered(choice);
    for (const input of offered()) {
      const c = choiceOf(input.value);
      input.checked = input.value === valueOf(choice);
      input.closest('label').querySelector('.size-words').textContent = input.value === refusedValue
        ? 'The desktop refused this size.' : words(c, resizable, phone);
    }
    button.querySelector('.size-now').textContent = label(choice);
    button.setAttribute('aria-label', `Size: ${label(choice)}`);
    button.title = `Size: ${label(choice)}. The desktop's size: fit to this window, its actual size, or a fixed size`;
    const s = view.size();
    const now = s ? `${s.w}×${s.h}` : 'not connected yet';
    const sc = renderScreens();
    if (note.dataset.kind !== 'error') {
      note.textContent = sc?.count > 1 && sc.heads ? `This screen is ${now}; each of the VM's other screens is its own window's size.`
        : sc?.count > 1 && sc.split ? splitWords(sc, now)
        : sc?.count > 1 ? `This desktop is ${now} over ${sc.count} screens, each its window's size; close the other screen windows to choose a size.`
        : resizable ? `This desktop is ${now}.`
          : `This desktop keeps its own size (${now}): its server cannot change it.`;
    }
  }

  // renderScreens fills the Add a screen row and, while the desktop has
  // more than one screen, keeps the sizes from being chosen; it returns
  // the view's screens, or null where the console has one screen only.
  function renderScreens() {
    const sc = view.screens?.() || null;
    // A phone's desktop has one screen: the row would only say so.
    screensRow.hidden = !sc || (!sc.can && !sc.why);
    if (!sc) return null;
    const many = sc.count > 1;
    for (const input of offered()) input.disabled = many && !sc.heads;
    addScreen.disabled = !sc.can || sc.count >= sc.max;
    let text;
    if (!sc.can) {
      text = sc.why;
    } else if (sc.count >= sc.max && sc.heads) {
      text = `${sc.count} screens, one per head of this virtual machine's display. Closing screen ${sc.count}'s window turns that monitor off in the VM.`;
    } else if (sc.count >= sc.max) {
      text = `${sc.count} screens, the most a desktop has: close a screen window to add another.`;
    } else if (blocked) {
      text = 'The browser blocked the new window: allow pop-ups for this portal, then add the screen again.';
    } else {
      text = sc.heads ? `Shows this virtual machine's head ${sc.count + 1} in another window, as its monitor ${sc.count + 1}, the window's size: move it to your other monitor and use Full screen there.`
        : sc.split && !many ? "Shows more of the desktop in another window: the VM's one display grows to your windows' size together, and each window shows its part. Move it to your other monitor and use Full screen there."
        : many ? `${sc.count} screens now. Adds screen ${sc.count + 1} in another window, to the right of the others (its window's bar can put it elsewhere).`
        : 'Shows more of the desktop in another window, as a second monitor: move it to your other monitor and use Full screen there.';
    }
    screenWords.textContent = text;
    return sc;
  }

  // keep asks the portal to keep c as the user's choice, one request at
  // a time so that the last choice is the one kept; a refusal is said in
  // the list's note (the choice still applies on this page).
  let keeping = Promise.resolve();
  function keep(c) {
    keeping = keeping.then(async () => {
      const why = await putSetting(wrap.dataset.keep, { size: valueOf(c) });
      if (!why || valueOf(c) !== valueOf(choice)) return;
      note.textContent = `${label(c)} applies on this page, but the portal did not keep it for next time: ${why}`;
      note.dataset.kind = 'error';
    });
  }

  if (adopted) keep(adopted);

  function open(on) {
    if (on) render();
    list.hidden = !on;
    button.setAttribute('aria-expanded', String(on));
  }
  const onButton = (ev) => {
    ev.stopPropagation();
    open(list.hidden);
  };
  const onChange = (ev) => {
    if (ev.target.name !== 'size') return;
    choice = choiceOf(ev.target.value);
    keep(choice);
    delete note.dataset.kind;
    refusedValue = '';
    if (notice) notice.hidden = true;
    view.apply(choice);
    render();
  };
  const onDocument = (ev) => {
    if (!list.hidden && !ev.target.closest('#size-list, #size-menu')) open(false);
  };
  const onAdd = () => {
    blocked = view.addScreen() === null;
    render();
  };
  button.addEventListener('click', onButton);
  list.addEventListener('change', onChange);
  addScreen.addEventListener('click', onAdd);
  document.addEventListener('click', onDocument);
  wrap.hidden = false;
  view.apply(choice);
  render();

  return {
    changed: render,
    refused(c, status) {
      const s = view.size();
      const why = statusWords[status] || 'its server refused it';
      const text = c.split ? `The desktop refused ${c.w}×${c.h}, your ${c.n} windows together: ${why}. `
        + `It stays ${s ? `${s.w}×${s.h}` : 'as it was'}, and each window shows all of it, scaled.`
        : `The desktop refused ${label(c)}: ${why}. `
        + `It stays ${s ? `${s.w}×${s.h}` : 'as it was'}; choose another size under Size.`;
      note.textContent = text;
      note.dataset.kind = 'error';
      refusedValue = valueOf(c);
      if (notice) {
        notice.querySelector('span').textContent = text;
        notice.hidden = false;
      }
      render();
    },
    // settled: the desktop took what was asked after a refusal (or the
    // screens it refused are gone), so the refusal's words go.
    settled() {
      if (!refusedValue) return;
      refusedValue = '';
      delete note.dataset.kind;
      if (notice) notice.hidden = true;
      render();
    },
    close() {
      open(false);
      button.removeEventListener('click', onButton);
      list.removeEventListener('change', onChange);
      addScreen.removeEventListener('click', onAdd);
      document.removeEventListener('click', onDocument);
      wrap.hidden = true;
      delete note.dataset.kind;
      if (notice) notice.hidden = true;
    },
  };
}
