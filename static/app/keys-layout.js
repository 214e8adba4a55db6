// The desktop's keyboard layout, on consoles whose desktop makes the
// characters from physical keys (a VM's VNC console: QEMU's Extended Key
// Event): Type as keys and input methods type with the keys that layout
// has for each character (layouts.js). The choice is the Keys list's
// select; the portal keeps it for the user (the page carries it in the
// list's data-layout; a change is PUT to its data-keep). With none kept
// it starts from this browser's keyboard where the browser tells it
// (the Keyboard Map API), else from its language.
import { fromLayoutMap, guess, known, layoutNames } from './layouts.js';
import { putSetting } from './settings.js';

const list = document.getElementById('keys-list');
const kept = list?.dataset.layout || '';
let chosen = known(kept) ? kept : guess();
let picked = false; // the user chose on this page

// The browser's keyboard, asked once, unless a choice is kept.
if (!known(kept)) {
  navigator.keyboard?.getLayoutMap?.().then((map) => {
    if (!picked) chosen = fromLayoutMap(map, chosen);
  }).catch(() => {});
}

// layout returns the chosen layout's id.
export function layout() {
  return chosen;
}

// layoutSelect returns the Keys list's row: a select of the layouts that
// sets the choice and asks the portal to keep it, saying in the row when
// it did not.
export function layoutSelect() {
  const row = document.createElement('div');
  row.className = 'keys-layout';
  row.dataset.testid = 'keys-layout';
  const label = document.createElement('label');
  label.textContent = "This desktop's layout ";
  const select = document.createElement('select');
  select.dataset.testid = 'keys-layout-select';
  select.append(...layoutNames.map(({ id, name }) => new Option(name, id)));
  label.append(select);
  const note = document.createElement('small');
  note.className = 'keys-layout-note';
  note.dataset.testid = 'keys-layout-note';
  note.setAttribute('role', 'status');
  row.append(label, note);
  let keeping = Promise.resolve();
  select.addEventListener('change', () => {
    if (!known(select.value)) return;
    chosen = select.value;
    picked = true;
    note.textContent = '';
    const value = chosen;
    keeping = keeping.then(async () => {
      const why = list?.dataset.keep ? await putSetting(list.dataset.keep, { keyboard: value }) : null;
      if (why && value === chosen) note.textContent = `It applies on this page, but the portal did not keep it for next time: ${why}`;
    });
  });
  return { row, refresh() { select.value = layout(); } };
}
