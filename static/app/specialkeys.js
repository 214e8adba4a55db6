// The special keys menu: key combinations a browser keeps for itself or
// the device lacks, sent to the open console's special(combo). A module
// returns false for a combination its protocol cannot send.
import { layoutSelect } from './keys-layout.js';

// combos are the menu's entries: name is a key name (keyboard.js), the
// flags the modifiers held.
export const combos = [
  { id: 'ctrl-alt-del', label: 'Ctrl+Alt+Del', name: 'Delete', ctrl: true, alt: true },
  ...[1, 2, 3, 4, 5, 6, 7].map((n) => ({ id: `ctrl-alt-f${n}`, label: `Ctrl+Alt+F${n}`, name: `F${n}`, ctrl: true, alt: true })),
  { id: 'super', label: 'Win / Super', name: 'Meta' },
  { id: 'alt-tab', label: 'Alt+Tab', name: 'Tab', alt: true },
  { id: 'print', label: 'Print Screen', name: 'PrintScreen' },
];

// attachKeysMenu fills list with a button per combination; button opens
// and closes it. target returns the open console's module result, whose
// keysNote(), where it has one, says above the keys how the desktop reads
// them, and whose layouts, when true, shows the choice of the desktop's
// layout (keys-layout.js); say reports a combination the console cannot
// send.
export function attachKeysMenu(button, list, target, say) {
  const note = document.createElement('p');
  note.className = 'size-note keys-note';
  note.dataset.testid = 'keys-note';
  const layouts = layoutSelect();
  list.replaceChildren(note, layouts.row, ...combos.map((c) => {
    const b = document.createElement('button');
    b.type = 'button';
    b.textContent = c.label;
    b.dataset.testid = `key-${c.id}`;
    b.dataset.combo = c.id;
    return b;
  }));
  const open = (on) => {
    if (on) {
      note.textContent = target()?.keysNote?.() || '';
      layouts.row.hidden = !target()?.layouts;
      layouts.refresh();
    }
    list.hidden = !on;
    button?.setAttribute('aria-expanded', String(on));
  };
  button?.addEventListener('click', (ev) => {
    ev.stopPropagation();
    open(list.hidden);
  });
  list.addEventListener('click', (ev) => {
    const b = ev.target.closest('button[data-combo]');
    if (!b) return;
    const c = combos.find((x) => x.id === b.dataset.combo);
    const special = target()?.special;
    if (!special || special(c) === false) say(`${c.label} cannot be sent to this console.`);
    if (button) open(false);
  });
  return { open };
}
