// Keys typed into an RDP session without the browser's keyboard: the
// on-screen keyboard (keyboard.js), paste as keystrokes (clipboard.js) and
// the special keys menu (specialkeys.js). IronRDP's component takes keys
// only from the window's keydown and keyup while its canvas has the focus,
// which the on-screen keyboard's input holds; so these go to the session
// the way IronRDP's own key handling sends them: InputTransactions of
// DeviceEvents (scan codes) through Session.applyInputs. The component
// does not hand out its session, so withSession wraps the backend's
// SessionBuilder to see the one its connect makes.
import { printable } from './console-vnc.js';
import { nameOf, strokes } from './layouts.js';

// withSession returns backend with a SessionBuilder whose sessions are
// passed to got as they connect.
export function withSession(backend, got) {
  const Builder = backend.SessionBuilder;
  function SessionBuilder() {
    const b = new Builder();
    const connect = b.connect.bind(b);
    b.connect = async () => {
      const s = await connect();
      got(s);
      return s;
    };
    return b;
  }
  return { ...backend, SessionBuilder };
}

// sender returns send(events): the backend's DeviceEvents applied to the
// session that session() returns as one InputTransaction (nothing before
// it connects).
export function sender(backend, session) {
  const { InputTransaction } = backend;
  return (events) => {
    const s = session();
    if (!s) return;
    const tx = new InputTransaction();
    for (const e of events) tx.addEvent(e);
    s.applyInputs(tx);
  };
}

// Scan codes (set 1, as IronRDP sends them; 0xE0xx are extended keys) of a
// US keyboard, which is what the desktops' RDP servers map them with.
const sc = {
  Escape: 0x01, Backspace: 0x0e, Tab: 0x0f, Enter: 0x1c, Control: 0x1d, Shift: 0x2a, Alt: 0x38, ' ': 0x39,
  Home: 0xe047, ArrowUp: 0xe048, ArrowLeft: 0xe04b, ArrowRight: 0xe04d, End: 0xe04f, ArrowDown: 0xe050,
  Delete: 0xe053, PrintScreen: 0xe037, Meta: 0xe05b,
  F11: 0x57, F12: 0x58,
};
for (let i = 1; i <= 10; i++) sc[`F${i}`] = 0x3a + i; // F1 = 0x3b
// Each row: the characters without Shift, with Shift, and the first key's code.
for (const [plain, shifted, first] of [
  ['1234567890-=', '!@#$%^&*()_+', 0x02],
  ['qwertyuiop[]', 'QWERTYUIOP{}', 0x10],
  ["asdfghjkl;'`", 'ASDFGHJKL:"~', 0x1e],
  ['\\zxcvbnm,./', '|ZXCVBNM<>?', 0x2b],
]) {
  [...plain].forEach((ch, i) => { sc[ch] = first + i; });
  [...shifted].forEach((ch, i) => { sc[ch] = -(first + i); }); // negative: with Shift
}

// Scan codes of the physical keys layouts.js names (KeyboardEvent.code).
const byCode = {
  Backquote: 0x29, Minus: 0x0c, Equal: 0x0d, BracketLeft: 0x1a, BracketRight: 0x1b, Semicolon: 0x27, Quote: 0x28,
  Backslash: 0x2b, IntlBackslash: 0x56, Comma: 0x33, Period: 0x34, Slash: 0x35, Space: 0x39, Enter: 0x1c, Tab: 0x0f,
  ShiftLeft: 0x2a, AltRight: 0xe038,
};
[...'1234567890'].forEach((d, i) => { byCode[`Digit${d}`] = 0x02 + i; });
for (const [row, first] of [['QWERTYUIOP', 0x10], ['ASDFGHJKL', 0x1e], ['ZXCVBNM', 0x2c]]) {
  [...row].forEach((c, i) => { byCode[`Key${c}`] = first + i; });
}

// rdpKeys types into the session that session() returns (undefined until
// connected), with the backend's DeviceEvent and InputTransaction. It has
// the keys interface of keyboard.js, typable and combo (specialkeys.js).
// With unicode (the portal says the server takes RDP's Unicode keyboard
// events: Windows) any printable character may be typed; else text goes
// as the scan codes of the keys layout() (a layouts.js id: the user's
// choice of the desktop's layout, as for a VM) has for it, which the
// desktop's own layout turns into characters (freerdp-shadow drops
// Unicode events), and typable is what that layout types.
export function rdpKeys(backend, session, unicode = false, layout = () => 'us') {
  const { DeviceEvent } = backend;
  const send = sender(backend, session);
  const down = (code) => DeviceEvent.keyPressed(code);
  const up = (code) => DeviceEvent.keyReleased(code);
  const mods = [['ctrl', sc.Control], ['alt', sc.Alt], ['shift', sc.Shift], ['meta', sc.Meta]];
  // press sends one key with the modifiers held around it.
  function press(code, held = {}) {
    const shift = code < 0;
    const k = Math.abs(code);
    const on = mods.filter(([m]) => held[m] || (m === 'shift' && shift)).map(([, c]) => c);
    send([...on.map(down), down(k), up(k), ...on.toReversed().map(up)]);
  }
  // stroke sends one key of strokes() with Shift or AltGr held around it.
  const stroke = (k) => {
    const held = [k.shift && byCode.ShiftLeft, k.altgr && byCode.AltRight].filter(Boolean);
    send([...held.map(down), down(byCode[k.code]), up(byCode[k.code]), ...held.toReversed().map(up)]);
  };
  const keys = {
    text(s) {
      for (const ch of s) {
        const name = ch === '\n' ? 'Enter' : ch === '\t' ? 'Tab' : ch;
        if (!unicode) strokes(layout(), ch)?.forEach(stroke);
        else if (name in sc) press(sc[name]);
        else send([DeviceEvent.unicodePressed(ch), DeviceEvent.unicodeReleased(ch)]); // not on a US keyboard
      }
    },
    // who names what types the text, for a refusal.
    who: () => (unicode ? "this console's keyboard" : `this desktop's ${nameOf(layout())} layout`),
    key(name, held = {}) {
      const code = sc[name] ?? sc[name.toLowerCase()];
      if (code === undefined) {
        keys.text(name);
        return;
      }
      press(code, held);
    },
    typable: unicode ? printable : (ch) => strokes(layout(), ch) !== null,
    // combo sends a special-keys menu entry. Its modifiers go up before
    // its key, as on VNC (console-vnc.js says why): with Alt let go after
    // Tab, openbox's Alt+Tab stayed open over RDP too, the focus unchanged.
    combo(c) {
      if (!session()) return false;
      const code = sc[c.name];
      if (code === undefined) return false;
      const on = mods.filter(([m]) => c[m]).map(([, k]) => k);
      send([...on.map(down), down(code), ...on.toReversed().map(up), up(code)]);
      return true;
    },
  };
  return keys;
}
