// The console page: asks the portal which console to open for this desktop
// and hands the screen to that protocol's module. Each module exports
// `open(screen, info, ui)`, where info is the /connect answer's chosen
// option and ui has say(text, kind) and lost(); it returns { close() }.
const screen = document.getElementById('screen');
const status = document.getElementById('status');
const reconnect = document.getElementById('reconnect');

// Protocol modules by name; their URLs are hashed, so the page lists them.
const modules = {
  vnc: screen.dataset.moduleVnc,
  rdp: screen.dataset.moduleRdp,
  serial: screen.dataset.moduleXterm,
  terminal: screen.dataset.moduleXterm,
};

const ui = {
  say(text, kind) {
    status.textContent = text;
    status.dataset.kind = kind || '';
    screen.dataset.connected = kind === 'ok' ? 'true' : 'false';
  },
  lost(text) {
    ui.say(text, 'error');
    reconnect.hidden = false;
  },
};

async function connectInfo() {
  const res = await fetch(screen.dataset.connect, { headers: { Accept: 'application/json' } });
  const body = await res.json().catch(() => ({}));
  if (!res.ok) {
    throw new Error([body.error || `The portal answered ${res.status}.`, body.hint].filter(Boolean).join(' '));
  }
  return body;
}

let current = null;

async function connect() {
  reconnect.hidden = true;
  current?.close();
  current = null;
  ui.say('Connecting…', 'busy');
  let info;
  try {
    info = await connectInfo();
  } catch (err) {
    ui.lost(err.message);
    return;
  }
  const url = modules[info.protocol];
  if (!url) {
    ui.lost(`This desktop offers ${info.protocol}, which this page cannot show.`);
    return;
  }
  screen.replaceChildren();
  const mod = await import(url);
  current = await mod.open(screen, info, ui);
}

reconnect.addEventListener('click', connect);
document.getElementById('fullscreen').addEventListener('click', () => {
  screen.requestFullscreen?.();
});
connect();
