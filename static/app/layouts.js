// Keyboard layouts, for typing text as physical keys (scan codes) into a
// desktop that makes the characters with its own layout: a QEMU or
// KubeVirt VM's console takes QEMU's Extended Key Event, and the guest's
// layout, not the browser's, decides what a key types. strokes says which
// keys a layout needs for a character: the key itself with Shift or
// AltGr, a dead key and a letter (ê), or a dead key and Space (^).
//
// The tables hold only what the layout types alike on Linux (the console
// and X) and Windows; keys that differ there are left out, so text with
// them is refused rather than typed wrong.

// Physical keys, by KeyboardEvent.code, row by row as the tables list them.
const rows = [
  ['Backquote', ...[1, 2, 3, 4, 5, 6, 7, 8, 9, 0].map((d) => `Digit${d}`), 'Minus', 'Equal'],
  [...'QWERTYUIOP'].map((c) => `Key${c}`).concat('BracketLeft', 'BracketRight'),
  [...'ASDFGHJKL'].map((c) => `Key${c}`).concat('Semicolon', 'Quote', 'Backslash'),
  ['IntlBackslash', ...[...'ZXCVBNM'].map((c) => `Key${c}`), 'Comma', 'Period', 'Slash'],
];

// Dead keys by name, with the combining mark each adds to the next letter.
const marks = {
  dead_grave: '\u0300', dead_acute: '\u0301', dead_circumflex: '\u0302',
  dead_tilde: '\u0303', dead_diaeresis: '\u0308',
};

// X keysyms of the dead keys (sent beside the scan code).
const deadKeysyms = { dead_grave: 0xfe50, dead_acute: 0xfe51, dead_circumflex: 0xfe52, dead_tilde: 0xfe53, dead_diaeresis: 0xfe57 };

const none = '∅';
const usRows = {
  plain: ['` 1 2 3 4 5 6 7 8 9 0 - =', 'q w e r t y u i o p [ ]', "a s d f g h j k l ; ' \\", '∅ z x c v b n m , . /'],
  shift: ['~ ! @ # $ % ^ & * ( ) _ +', 'Q W E R T Y U I O P { }', 'A S D F G H J K L : " |', '∅ Z X C V B N M < > ?'],
};

// Each layout: its name and, per level (plain, Shift, AltGr), one string
// per row of keys, a key's characters separated by spaces; ∅ is a key
// that types nothing the table keeps. A dead key is written
// dead_<accent>, and dead_<accent>:c where the dead key then Space types
// c alike everywhere.
const tables = {
  us: { name: 'English (US)', ...usRows },
  'us-intl': {
    name: 'English (US, international)',
    plain: ['dead_grave:` 1 2 3 4 5 6 7 8 9 0 - =', 'q w e r t y u i o p [ ]', "a s d f g h j k l ; dead_acute:' \\", '∅ z x c v b n m , . /'],
    shift: ['dead_tilde:~ ! @ # $ % dead_circumflex:^ & * ( ) _ +', 'Q W E R T Y U I O P { }', 'A S D F G H J K L : dead_diaeresis:" |', '∅ Z X C V B N M < > ?'],
  },
  gb: {
    name: 'English (UK)',
    plain: ['` 1 2 3 4 5 6 7 8 9 0 - =', 'q w e r t y u i o p [ ]', "a s d f g h j k l ; ' #", '\\ z x c v b n m , . /'],
    shift: ['¬ ! " £ $ % ^ & * ( ) _ +', 'Q W E R T Y U I O P { }', 'A S D F G H J K L : @ ~', '| Z X C V B N M < > ?'],
    altgr: ['∅ ∅ ∅ ∅ € ∅ ∅ ∅ ∅ ∅ ∅ ∅ ∅'],
  },
  de: {
    name: 'German',
    plain: ['dead_circumflex:^ 1 2 3 4 5 6 7 8 9 0 ß dead_acute', 'q w e r t z u i o p ü +', 'a s d f g h j k l ö ä #', '< y x c v b n m , . -'],
    shift: ['° ! " § $ % & / ( ) = ? dead_grave:`', 'Q W E R T Z U I O P Ü *', "A S D F G H J K L Ö Ä '", '> Y X C V B N M ; : _'],
    altgr: ['∅ ∅ ² ³ ∅ ∅ ∅ { [ ] } \\ ∅', '@ ∅ € ∅ ∅ ∅ ∅ ∅ ∅ ∅ ∅ ~', '', '| ∅ ∅ ∅ ∅ ∅ ∅ µ ∅ ∅ ∅'],
  },
  ch: {
    name: 'German (Switzerland)',
    plain: ["§ 1 2 3 4 5 6 7 8 9 0 ' dead_circumflex:^", 'q w e r t z u i o p ü dead_diaeresis', 'a s d f g h j k l ö ä $', '< y x c v b n m , . -'],
    shift: ['° + " * ç % & / ( ) = ? dead_grave:`', 'Q W E R T Z U I O P è !', 'A S D F G H J K L é à £', '> Y X C V B N M ; : _'],
    altgr: ['∅ ∅ @ # ∅ ∅ ¬ | ¢ ∅ ∅ dead_acute dead_tilde:~', '∅ ∅ € ∅ ∅ ∅ ∅ ∅ ∅ ∅ [ ]', '∅ ∅ ∅ ∅ ∅ ∅ ∅ ∅ ∅ ∅ { }', '\\'],
  },
  fr: {
    name: 'French',
    plain: ['² & é " \' ( - è _ ç à ) =', 'a z e r t y u i o p dead_circumflex:^ $', 'q s d f g h j k l m ù *', '< w x c v b n , ; : !'],
    shift: ['∅ 1 2 3 4 5 6 7 8 9 0 ° +', 'A Z E R T Y U I O P dead_diaeresis £', 'Q S D F G H J K L M % µ', '> W X C V B N ? . / §'],
    altgr: ['∅ ∅ ∅ # { [ | ∅ \\ ∅ @ ] }', '∅ ∅ €'],
  },
  es: {
    name: 'Spanish',
    plain: ["º 1 2 3 4 5 6 7 8 9 0 ' ¡", 'q w e r t y u i o p dead_grave:` +', 'a s d f g h j k l ñ dead_acute ç', '< z x c v b n m , . -'],
    shift: ['ª ! " · $ % & / ( ) = ? ¿', 'Q W E R T Y U I O P dead_circumflex:^ *', 'A S D F G H J K L Ñ dead_diaeresis Ç', '> Z X C V B N M ; : _'],
    altgr: ['\\ | @ # ∅ ∅ ¬', '∅ ∅ € ∅ ∅ ∅ ∅ ∅ ∅ ∅ [ ]', '∅ ∅ ∅ ∅ ∅ ∅ ∅ ∅ ∅ ∅ { }'],
  },
  se: {
    name: 'Swedish / Finnish',
    plain: ['§ 1 2 3 4 5 6 7 8 9 0 + dead_acute', 'q w e r t y u i o p å dead_diaeresis', "a s d f g h j k l ö ä '", '< z x c v b n m , . -'],
    shift: ['½ ! " # ¤ % & / ( ) = ? dead_grave:`', 'Q W E R T Y U I O P Å dead_circumflex:^', 'A S D F G H J K L Ö Ä *', '> Z X C V B N M ; : _'],
    altgr: ['∅ ∅ @ £ $ € ∅ { [ ] } \\ ∅', '∅ ∅ € ∅ ∅ ∅ ∅ ∅ ∅ ∅ ∅ dead_tilde:~', '', '| ∅ ∅ ∅ ∅ ∅ ∅ µ ∅ ∅ ∅'],
  },
};

// layoutNames lists the layouts by id, with their names, for the Keys list.
export const layoutNames = Object.entries(tables).map(([id, t]) => ({ id, name: t.name }));

// compiled holds each layout's characters and dead keys, built on first use.
const compiled = new Map();

// compile reads table t into chars (character → key) and dead (combining
// mark → dead key), each key as { code, shift, altgr, keysym }.
function compile(t) {
  const chars = new Map([[' ', { code: 'Space', keysym: 0x20 }], ['\n', { code: 'Enter', keysym: 0xff0d }], ['\t', { code: 'Tab', keysym: 0xff09 }]]);
  const dead = new Map();
  for (const level of ['plain', 'shift', 'altgr']) {
    (t[level] || []).forEach((row, r) => {
      row.split(' ').forEach((token, i) => {
        const code = rows[r][i];
        if (!token || token === none || !code) return;
        const key = { code, shift: level === 'shift', altgr: level === 'altgr' };
        const [name, spacing] = token.split(':');
        if (name in marks) {
          if (!dead.has(marks[name])) dead.set(marks[name], { ...key, keysym: deadKeysyms[name] });
          if (spacing && !chars.has(spacing)) chars.set(spacing, { ...key, keysym: deadKeysyms[name], then: chars.get(' ') });
        } else if (!chars.has(token)) {
          chars.set(token, key);
        }
      });
    });
  }
  return { chars, dead };
}

// layoutOf returns the compiled layout id, or US for an unknown id.
function layoutOf(id) {
  const known = id in tables ? id : 'us';
  if (!compiled.has(known)) compiled.set(known, compile(tables[known]));
  return compiled.get(known);
}

// strokes returns the keys layout id presses, one after the other, to
// type ch, each as { code, shift, altgr, keysym } (keysym: the X keysym
// the key types, sent beside its scan code); null when the layout has no
// way to type ch. A character the layout lacks but composes from a letter
// and an accent it has as a dead key (ê, ñ) is the dead key then the
// letter: only vowels and n, and only into Latin-1, which every
// system's dead keys compose alike (the Linux console's table is small).
export function strokes(id, ch) {
  const { chars, dead } = layoutOf(id);
  const sym = (c) => { const cp = c.codePointAt(0); return cp < 0x100 ? cp : 0x01000000 | cp; };
  const key = chars.get(ch);
  if (key?.then) return [key, key.then];
  if (key) return [{ ...key, keysym: key.keysym ?? sym(ch) }];
  const [base, mark, ...more] = [...ch.normalize('NFD')];
  const d = dead.get(mark);
  const b = chars.get(base);
  if (more.length || !d || !b || b.then || !/^[aeiouynAEIOUYN]$/.test(base) || ch.codePointAt(0) > 0xff) return null;
  return [d, { ...b, keysym: sym(base) }];
}

// fromLayoutMap returns the layout whose unshifted keys agree most with
// map (the browser's KeyboardLayoutMap: key code → character), fallback
// among those that agree most, or when none agrees at all.
export function fromLayoutMap(map, fallback) {
  let best = [];
  let most = 0;
  for (const [id, t] of Object.entries(tables)) {
    let n = 0;
    t.plain.forEach((row, r) => row.split(' ').forEach((token, i) => {
      if (rows[r][i] && map.get(rows[r][i]) === token) n++;
    }));
    if (n > most) [best, most] = [[id], n];
    else if (n === most) best.push(id);
  }
  return most === 0 || best.includes(fallback) ? fallback : best[0];
}

// guess returns the layout the browser's language suggests: de-CH is Swiss
// German, en-GB and en-IE UK, sv and fi Swedish / Finnish; else US.
export function guess(languages = navigator.languages || [navigator.language]) {
  for (const tag of languages) {
    const [lang, region] = String(tag).split('-');
    if (lang === 'de') return region === 'CH' ? 'ch' : 'de';
    if (lang === 'fr') return 'fr';
    if (lang === 'es') return 'es';
    if (lang === 'sv' || lang === 'fi') return 'se';
    if (lang === 'en') return region === 'GB' || region === 'IE' ? 'gb' : 'us';
  }
  return 'us';
}

// known reports whether id names a layout here.
export function known(id) {
  return Object.hasOwn(tables, id);
}

// nameOf returns the layout's name.
export function nameOf(id) {
  return tables[id]?.name || tables.us.name;
}
