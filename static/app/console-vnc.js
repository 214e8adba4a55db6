// VNC console: noVNC over the portal's websocket relay.
export function wsURL(path) {
  const url = new URL(path, window.location.href);
  url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
  return url.href;
}

export async function open(screen, info, ui) {
  const { default: RFB } = await import(screen.dataset.novnc);
  // Open the websocket here, not in noVNC, to read the close reason the
  // portal sends (released by an admin, reclaimed for idleness, ...).
  const ws = new WebSocket(wsURL(info.websocket), ['binary']);
  ws.binaryType = 'arraybuffer';
  let closeReason = '';
  let goingAway = false;
  ws.addEventListener('close', (ev) => {
    closeReason = ev.reason;
    // Released or reclaimed is final; taken over by another tab is not:
    // Reconnect takes the desktop back.
    goingAway = ev.code === 1001 && ev.reason !== 'session ended' && !ev.reason.startsWith('taken over');
  });
  const rfb = new RFB(screen, ws, {});
  rfb.scaleViewport = true;
  rfb.resizeSession = false;
  rfb.focusOnClick = true;
  rfb.viewOnly = Boolean(info.viewOnly); // an admin watching (admin-shadow.js)
  rfb.addEventListener('connect', () => {
    ui.say('Connected', 'ok');
    rfb.focus();
  });
  rfb.addEventListener('disconnect', (ev) => {
    ui.lost(closeReason || (ev.detail.clean ? 'Disconnected.' : 'The connection was lost.'), goingAway);
  });
  rfb.addEventListener('securityfailure', (ev) => {
    ui.lost(`The desktop refused the connection: ${ev.detail.reason || 'security failure'}.`);
  });
  return { close: () => rfb.disconnect(), keys: vncKeys(rfb) };
}

// X keysyms of the keys the on-screen keyboard sends by name.
const XK = {
  Enter: 0xff0d, Backspace: 0xff08, Tab: 0xff09, Escape: 0xff1b, Delete: 0xffff,
  Home: 0xff50, ArrowLeft: 0xff51, ArrowUp: 0xff52, ArrowRight: 0xff53, ArrowDown: 0xff54, End: 0xff57,
  Control: 0xffe3, Alt: 0xffe9,
};

// keysym returns the keysym of a named key or of one character: Latin-1
// characters are their own keysyms, the rest are 0x01000000 + code point.
function keysym(name) {
  if (name in XK) return XK[name];
  const cp = name.codePointAt(0);
  return cp < 0x100 ? cp : 0x01000000 | cp;
}

// vncKeys types into the desktop with RFB key events; the server (TigerVNC
// Xvnc) adds Shift where a character needs it.
export function vncKeys(rfb) {
  const tap = (k) => rfb.sendKey(k, null); // press and release
  return {
    text(s) {
      for (const ch of s) tap(keysym(ch));
    },
    key(name, { ctrl, alt } = {}) {
      if (ctrl) rfb.sendKey(XK.Control, null, true);
      if (alt) rfb.sendKey(XK.Alt, null, true);
      tap(keysym(name));
      if (alt) rfb.sendKey(XK.Alt, null, false);
      if (ctrl) rfb.sendKey(XK.Control, null, false);
    },
  };
}
