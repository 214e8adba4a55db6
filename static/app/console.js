// The console page: asks the portal which console to open for this desktop,
// then draws it with noVNC through the portal's websocket relay.
const screen = document.getElementById('screen');
const status = document.getElementById('status');
const reconnect = document.getElementById('reconnect');

function say(text, kind) {
  status.textContent = text;
  status.dataset.kind = kind || '';
}

async function connectInfo() {
  const res = await fetch(screen.dataset.connect, { headers: { Accept: 'application/json' } });
  const body = await res.json().catch(() => ({}));
  if (!res.ok) {
    throw new Error([body.error || `The portal answered ${res.status}.`, body.hint].filter(Boolean).join(' '));
  }
  return body;
}

function wsURL(path) {
  const url = new URL(path, window.location.href);
  url.protocol = url.protocol === 'https:' ? 'wss:' : 'ws:';
  return url.href;
}

let rfb = null;

async function connect() {
  reconnect.hidden = true;
  say('Connecting…', 'busy');
  let info;
  try {
    info = await connectInfo();
  } catch (err) {
    say(err.message, 'error');
    reconnect.hidden = false;
    return;
  }
  if (info.protocol !== 'vnc') {
    say(`This desktop offers ${info.protocol}, which this page cannot show yet.`, 'error');
    return;
  }
  const { default: RFB } = await import(screen.dataset.novnc);
  screen.replaceChildren();
  rfb = new RFB(screen, wsURL(info.websocket), { wsProtocols: ['binary'] });
  rfb.scaleViewport = true;
  rfb.resizeSession = false;
  rfb.focusOnClick = true;
  rfb.addEventListener('connect', () => {
    say('Connected', 'ok');
    screen.dataset.connected = 'true';
    rfb.focus();
  });
  rfb.addEventListener('disconnect', (ev) => {
    screen.dataset.connected = 'false';
    say(ev.detail.clean ? 'Disconnected.' : 'The connection was lost.', 'error');
    reconnect.hidden = false;
  });
  rfb.addEventListener('securityfailure', (ev) => {
    say(`The desktop refused the connection: ${ev.detail.reason || 'security failure'}.`, 'error');
  });
}

reconnect.addEventListener('click', connect);
document.getElementById('fullscreen').addEventListener('click', () => {
  screen.requestFullscreen?.();
});
connect();
