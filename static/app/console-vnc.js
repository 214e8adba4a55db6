// VNC console: noVNC over the portal's websocket relay.
export function wsURL(path) {
  const url = new URL(path, window.location.href);
  url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
  return url.href;
}

export async function open(screen, info, ui) {
  const { default: RFB } = await import(screen.dataset.novnc);
  const rfb = new RFB(screen, wsURL(info.websocket), { wsProtocols: ['binary'] });
  rfb.scaleViewport = true;
  rfb.resizeSession = false;
  rfb.focusOnClick = true;
  rfb.addEventListener('connect', () => {
    ui.say('Connected', 'ok');
    rfb.focus();
  });
  rfb.addEventListener('disconnect', (ev) => {
    ui.lost(ev.detail.clean ? 'Disconnected.' : 'The connection was lost.');
  });
  rfb.addEventListener('securityfailure', (ev) => {
    ui.lost(`The desktop refused the connection: ${ev.detail.reason || 'security failure'}.`);
  });
  return { close: () => rfb.disconnect() };
}
