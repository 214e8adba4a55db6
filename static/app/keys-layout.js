// The desktop's keyboard layout, on consoles whose desktop makes the
// characters from physical keys (a VM's VNC console: QEMU's Extended Key
// Event): Type as keys and input methods type with the keys that layout
// has for each character (layouts.js). The choice is the Keys list's
// select; it starts from the browser's language.
import { guess, known, layoutNames } from './layouts.js';

let chosen = '';

// layout returns the chosen layout's id.
export function layout() {
  if (!chosen) chosen = guess();
  return chosen;
}

// layoutSelect returns the Keys list's row: a select of the layouts that
// sets the choice; changed is told of each change.
export function layoutSelect(changed = () => {}) {
  const row = document.createElement('label');
  row.className = 'keys-layout';
  row.dataset.testid = 'keys-layout';
  row.append("This desktop's layout ");
  const select = document.createElement('select');
  select.dataset.testid = 'keys-layout-select';
  select.append(...layoutNames.map(({ id, name }) => new Option(name, id)));
  select.value = layout();
  select.addEventListener('change', () => {
    if (!known(select.value)) return;
    chosen = select.value;
    changed(chosen);
  });
  row.append(select);
  return { row, refresh() { select.value = layout(); } };
}
