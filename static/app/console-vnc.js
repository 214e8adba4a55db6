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
  return { close: () => rfb.disconnect() };
}
