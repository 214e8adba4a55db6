// The admin's view-only console: the VNC module with input switched off.
const screen = document.getElementById('screen');
const status = document.getElementById('status');

const ui = {
  say(text, kind) {
    status.textContent = text;
    status.dataset.kind = kind || '';
    screen.dataset.connected = kind === 'ok' ? 'true' : 'false';
  },
  lost(text) { ui.say(text, 'error'); },
};

async function watch() {
  const res = await fetch(screen.dataset.connect, { headers: { Accept: 'application/json' } });
  const info = await res.json().catch(() => ({}));
  if (!res.ok) {
    ui.lost([info.error || `The portal answered ${res.status}.`, info.hint].filter(Boolean).join(' '));
    return;
  }
  const vnc = [info, ...(info.fallbacks || [])].find((o) => o.protocol === 'vnc');
  if (!vnc) {
    ui.lost('This desktop has no VNC console to watch.');
    return;
  }
  const mod = await import(screen.dataset.moduleVnc);
  await mod.open(screen, { ...vnc, viewOnly: true }, ui);
}

watch();
