// VNC console: noVNC over the portal's websocket relay. The desktop takes
// the window's size, or the one the user's Size choice names, when its
// server can resize (ExtendedDesktopSize, as local Xvnc desktops do) and
// is scaled to fit otherwise (vnc-size.js). The clipboard
// goes both ways through noVNC (ClientCutText / ServerCutText, Unicode by
// the Extended Clipboard where the server offers it); the portal's relay
// drops what the pool's policy forbids. A pinch zooms the view (zoom.js).
import { attachZoom } from './zoom.js';
import { attach as attachQuality } from './vnc-quality.js';
import { attach as attachSize } from './vnc-size.js';
import { takeEarly, EARLY_MISMATCH } from './console-early.js';
import { waitForConsent } from './connect.js';
import { vncIME } from './ime.js';
import { notice as videoNotice, watchVideo } from './vnc-video.js';
import { attachRTC } from './vnc-webrtc.js';
import { attachScreenWindow } from './vnc-screens.js';
import { strokes, nameOf } from './layouts.js';
import { layout } from './keys-layout.js';

export function wsURL(path) {
  const url = new URL(path, window.location.href);
  url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
  return url.href;
}

// dropped tells whether a close ended a connection by accident (a network
// drop, the portal or the desktop restarting, the console moving to
// another portal server: 1012; the page's early handshake not noVNC's,
// EARLY_MISMATCH), which an automatic reconnect may mend, as opposed to a
// decision (released, reclaimed, taken over by another tab).
export function dropped(code, reason) {
  return code === 1006 || code === 1011 || code === 1012 || code === EARLY_MISMATCH || (code === 1001 && reason === 'session ended')
    || (code === 1000 && reason === 'desktop closed the connection');
}

// preload fetches noVNC's modules ahead of open (connect.js).
export function preload(screen) {
  return import(screen.dataset.novnc);
}

export async function open(screen, info, ui) {
  const t0 = performance.now();
  performance.measure('vnc-open');
  const { default: RFB } = await import(screen.dataset.novnc);
  performance.measure('vnc-import', { start: t0 }); // noVNC's modules: usually preloaded
  // Open the websocket here, not in noVNC, to read the close reason the
  // portal sends (released by an admin, reclaimed for idleness, ...); the
  // page's first one is already under way (console-early.js).
  const early = takeEarly(info.websocket);
  const ws = early?.ws || new WebSocket(wsURL(info.websocket), ['binary']);
  ws.binaryType = 'arraybuffer';
  let updates = 0; // the desktop's messages, for the connection chip
  ws.addEventListener('message', () => { updates++; });
  let closeReason = '';
  let goingAway = false;
  let retry = false;
  ws.addEventListener('close', (ev) => {
    closeReason = ev.reason;
    // Released or reclaimed is final; taken over by another tab is not:
    // Reconnect takes the desktop back.
    goingAway = ev.code === 1001 && ev.reason !== 'session ended' && !ev.reason.startsWith('taken over');
    retry = dropped(ev.code, ev.reason);
  });
  // noVNC fills the stage, which the zoom makes larger than the screen.
  const stage = document.createElement('div');
  stage.className = 'console-stage';
  screen.append(stage);
  const rfb = new RFB(stage, early?.channel || ws, {});
  // A lost video frame stalls noVNC for good: the page goes on with tiles
  // and says so (a new connection tries video again).
  delete screen.dataset.video;
  videoNotice(false);
  const video = watchVideo(rfb, RFB, () => {
    screen.dataset.video = 'tiles';
    videoNotice(true);
  });
  // The video on a WebRTC track where the portal offers one and the
  // Picture choice takes it (vnc-quality.js).
  const rtc = attachRTC(rfb, RFB, ws, stage, screen);
  rtc.offered = Boolean(info.webrtc);
  // A viewer beside the holder (an admin watching, a colleague invited,
  // admin-shadow.js) leaves the desktop's size and quality to the holder.
  const beside = Boolean(info.viewOnly || info.beside);
  // A screen window shows its own part of the desktop, at the size its
  // console window asks for it (vnc-screens.js).
  // A VM's display may have heads, each a screen window's own.
  const heads = info.caps?.heads > 1 ? info.caps.heads : 0;
  const size = info.screen ? screenWindow(rfb, screen.dataset.desktop, info.screen, ui, heads > 1)
    : attachSize(rfb, {
      keeps: info.caps?.resize === false,
      oneHead: !info.caps?.screens && !info.caps?.split && !heads,
      split: Boolean(info.caps?.split),
      heads,
      beside,
      desktop: screen.dataset.desktop,
    });
  // While zoomed the desktop keeps its size: it is the view that grows.
  const zoom = attachZoom(screen, stage, {
    mode: 'size',
    canvas: () => stage.querySelector('canvas'),
    gestures: true,
    zoomed: (on) => size.zoomed(on),
  });
  rfb.focusOnClick = true;
  const physicalKeys = () => !info.caps?.unicode && Boolean(rfb._qemuExtKeyEventSupported);
  const keys = vncKeys(rfb, Boolean(info.caps?.unicode), layout);
  vncIME(rfb, stage, keys);
  const quality = beside && !info.webrtc ? () => {} : attachQuality(rfb, rtc, beside);
  rfb.viewOnly = Boolean(info.viewOnly);
  // noVNC takes its screen (the canvas) away on disconnect; it goes back
  // so that the ended card lies over the dimmed last frame (app.css).
  let shown = null;
  // A watch the pool's policy puts to the holder waits for their answer.
  const waiting = info.asks ? waitForConsent(ui, info.asks) : () => {};
  rfb.addEventListener('connect', () => {
    waiting();
    shown = stage.querySelector(':scope > div');
    ui.say('Connected', 'ok');
    rfb.focus();
  });
  rfb.addEventListener('disconnect', (ev) => {
    waiting();
    size.ended('The console window this screen belongs to lost its connection to the desktop; reconnect there and add the screen again.');
    if (shown && !shown.isConnected) stage.append(shown);
    ui.lost(closeReason || (ev.detail.clean ? 'Disconnected.' : 'The connection was lost.'), goingAway, retry || !ev.detail.clean);
  });
  rfb.addEventListener('securityfailure', (ev) => {
    ui.lost(`The desktop refused the connection: ${ev.detail.reason || 'security failure'}.`);
  });
  rfb.addEventListener('clipboard', (ev) => ui.clipboard?.(ev.detail.text));
  screen.rfb = rfb; // for tests and the devtools
  return {
    close() {
      zoom.close();
      size.close();
      quality();
      video();
      rtc.close();
      rfb.disconnect();
      stage.remove();
    },
    keys,
    zoom,
    clipboard: { send: (text) => rfb.clipboardPasteFrom(text) },
    // updates returns the desktop's messages since it was last asked.
    updates() { const n = updates; updates = 0; return n; },
    special: (combo) => keys.combo(combo),
    // QEMU takes the physical keys (its Extended Key Event, passed on by
    // the portal's screen hub): the guest's own layout makes the
    // characters, as on a real PC. Xvnc (caps.unicode) types keysyms.
    keysNote: () => (physicalKeys() ? physicalKeysNote : ''),
    get layouts() { return physicalKeys(); },
  };
}

// physicalKeysNote is the Keys list's note on a console that sends
// physical keys (QEMU's VNC, RDP to a server without Unicode events).
export const physicalKeysNote = "Your keys reach this desktop as physical keys: its own keyboard layout makes the characters. Set it to your keyboard's (loadkeys de, setxkbmap de, or Windows' language settings), and choose it here for Type as keys.";

// screenWindow makes rfb screen n of its console window's desktop, in
// the shape vnc-size.js's attach returns; head: screen n is a VM
// display's head n, which takes this window's size.
function screenWindow(rfb, desktop, n, ui, head) {
  const whole = () => { const s = rfb._screenSize(); return { w: Math.floor(s.w), h: Math.floor(s.h) }; };
  const stop = attachScreenWindow(rfb, desktop, n, whole, (text) => ui.lost(text, true), { head });
  if (!head) return { zoomed() {}, ended() {}, close: stop };
  const size = attachSize(rfb, { head: true, desktop });
  return {
    zoomed: size.zoomed,
    ended() {},
    close() {
      stop();
      size.close();
    },
  };
}

// X keysyms of the keys sent by name.
const XK = {
  Enter: 0xff0d, Backspace: 0xff08, Tab: 0xff09, Escape: 0xff1b, Delete: 0xffff,
  Home: 0xff50, ArrowLeft: 0xff51, ArrowUp: 0xff52, ArrowRight: 0xff53, ArrowDown: 0xff54, End: 0xff57,
  PrintScreen: 0xff61, Control: 0xffe3, Shift: 0xffe1, Alt: 0xffe9, Meta: 0xffeb, // Super_L
  AltGr: 0xfe03, // ISO_Level3_Shift
};
for (let i = 1; i <= 12; i++) XK[`F${i}`] = 0xffbd + i; // F1 = 0xffbe

// keysym returns the keysym of a named key or of one character: Latin-1
// characters are their own keysyms, the rest are 0x01000000 + code point.
function keysym(name) {
  if (name in XK) return XK[name];
  const cp = name.codePointAt(0);
  return cp < 0x100 ? cp : 0x01000000 | cp;
}

// printable reports whether ch is a character a keyboard types: Tab,
// newlines and anything but control and format characters.
export function printable(ch) {
  return ch === '\n' || ch === '\t' || !/[\p{Cc}\p{Cf}\p{Cs}]/u.test(ch);
}

// Modifier keys as a keyboard sends them, by key code: a server that takes
// QEMU extended key events (Xvnc does) tracks them by scan code.
const held = [[0xffe1, 'ShiftLeft'], [0xffe2, 'ShiftRight'], [0xffe3, 'ControlLeft'], [0xffe4, 'ControlRight'],
  [0xffe9, 'AltLeft'], [0xffea, 'AltRight'], [0xffeb, 'MetaLeft'], [0xffec, 'MetaRight']];

// vncKeys types into the desktop with RFB key events; the server (TigerVNC
// Xvnc, QEMU) adds Shift where a character needs it. typable says which
// characters paste-as-keys may send: with unicode (the portal says the
// server maps any keysym to a key: Xvnc) every printable character, else
// printable ASCII, Tab and newlines, which every server's keymap has
// (QEMU's and a BIOS's are US layouts).
//
// A server that takes physical keys (QEMU's Extended Key Event, without
// caps.unicode) makes characters with the desktop's own layout: there text
// goes as the keys layout() (a layouts.js id: the user's choice of the
// desktop's layout) presses for it, and typable is what that layout types.
export function vncKeys(rfb, unicode = false, layout = () => 'us') {
  const tap = (k) => rfb.sendKey(k, null); // press and release
  const mods = [['ctrl', XK.Control], ['alt', XK.Alt], ['shift', XK.Shift], ['meta', XK.Meta]];
  const physical = () => !unicode && Boolean(rfb._qemuExtKeyEventSupported);
  // press sends one key of strokes() with Shift or AltGr held around it.
  const press = (k) => {
    const held = [k.shift && [XK.Shift, 'ShiftLeft'], k.altgr && [XK.AltGr, 'AltRight']].filter(Boolean);
    for (const [sym, code] of held) rfb.sendKey(sym, code, true);
    rfb.sendKey(k.keysym, k.code, true);
    rfb.sendKey(k.keysym, k.code, false);
    for (const [sym, code] of held.toReversed()) rfb.sendKey(sym, code, false);
  };
  const keys = {
    text(s) {
      for (const ch of s) {
        if (physical()) strokes(layout(), ch)?.forEach(press);
        else if (ch === '\n') tap(XK.Enter);
        else if (ch === '\t') tap(XK.Tab);
        else tap(keysym(ch));
      }
    },
    // who names what types the text, for a refusal.
    who: () => (physical() ? `this desktop's ${nameOf(layout())} layout` : "this console's keyboard"),
    key(name, held = {}) {
      for (const [m, k] of mods) if (held[m]) rfb.sendKey(k, null, true);
      tap(keysym(name));
      for (const [m, k] of mods.toReversed()) if (held[m]) rfb.sendKey(k, null, false);
    },
    typable: unicode ? printable : (ch) => (physical() ? strokes(layout(), ch) !== null
      : ch === '\n' || ch === '\t' || (ch >= ' ' && ch <= '~')),
    // release lets go of every modifier: one left held (the kiosk's
    // Ctrl+Alt+Shift+K, whose releases go to its overlay) would change
    // every key after it.
    release() {
      for (const [k, code] of held) rfb.sendKey(k, code, false);
    },
    // combo sends a special-keys menu entry (see specialkeys.js). Its
    // modifiers go up before its key: a window manager's switch
    // (openbox's Alt+Tab) grabs the keyboard once it has read the key's
    // press, and until then only the key's own grab, which ends with its
    // release, brings it the keys. An Alt let go after the key, in the
    // same burst, went to the window instead, and the switch stayed open,
    // the focus unchanged, until the next Alt.
    combo(c) {
      keys.release();
      if (c.name === 'Meta' && !c.ctrl && !c.alt) { tap(XK.Meta); return true; }
      const down = mods.filter(([m]) => c[m]);
      for (const [, k] of down) rfb.sendKey(k, null, true);
      rfb.sendKey(keysym(c.name), null, true);
      for (const [, k] of down.toReversed()) rfb.sendKey(k, null, false);
      rfb.sendKey(keysym(c.name), null, false);
      return true;
    },
  };
  return keys;
}
