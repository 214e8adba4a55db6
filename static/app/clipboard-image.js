// Pictures on the clipboard panel: the portal reads and sets the picture
// on the desktop's clipboard (a PNG, through the route in the panel's
// data-images), and the page moves it to and from this device's clipboard
// (the async Clipboard API where the browser allows it; a picture pasted
// into the panel's box always works). The pool's policy is the portal's
// to enforce; the buttons only follow it.

import { errorText } from './connect.js';

// MAX_PICTURE is the portal's limit on a clipboard picture, in bytes
// (handlers.MaxClipImage).
export const MAX_PICTURE = 16 << 20;

// attachPictures wires the panel's picture buttons; say writes the
// panel's note, policy returns { toDesktop, fromDesktop }. It returns
// refresh(), which sets the buttons for the policy.
export function attachPictures(panel, say, policy) {
  const url = panel.dataset.images;
  const send = panel.querySelector('#clipboard-image-send');
  const get = panel.querySelector('#clipboard-image-get');
  const shown = panel.querySelector('#clipboard-image');
  if (!url || !send || !get) return () => {};
  let busy = false;

  function refresh() {
    send.disabled = busy || !policy().toDesktop;
    get.disabled = busy || !policy().fromDesktop;
  }
  async function run(job) {
    busy = true;
    refresh();
    try { await job(); } finally { busy = false; refresh(); }
  }
  // refusal is the portal's answer in words: its error and hint.
  async function refusal(res) {
    return errorText(res.status, await res.json().catch(() => ({})));
  }

  // put sends a picture to the desktop's clipboard.
  async function put(blob) {
    if (blob.type !== 'image/png') {
      say(`Not sent: the picture is ${blob.type || 'of no known type'}; the desktop's clipboard takes PNG pictures.`, 'error');
      return;
    }
    if (blob.size > MAX_PICTURE) {
      say(`Not sent: the picture has ${blob.size} bytes; a clipboard picture may have at most ${MAX_PICTURE >> 20} MiB.`, 'error');
      return;
    }
    const res = await fetch(url, { method: 'PUT', body: blob, headers: { 'Content-Type': 'image/png' } }).catch((err) => err);
    if (res instanceof Error) say(`The picture did not reach the desktop: ${res.message}.`, 'error');
    else if (!res.ok) say(`The desktop's clipboard did not take the picture: ${await refusal(res)}`, 'error');
    else say(`Put a ${blob.size}-byte picture on the desktop's clipboard: paste it there.`, 'ok');
  }

  send.addEventListener('click', () => run(async () => {
    const items = await navigator.clipboard?.read?.().catch(() => null);
    const item = items?.find((i) => i.types.includes('image/png'));
    if (!item) {
      say(items ? "This device's clipboard holds no PNG picture: copy one, or paste it into the box above."
        : "The browser did not let the page read this device's clipboard: paste the picture into the box above (Ctrl+V).", 'warn');
      return;
    }
    await put(await item.getType('image/png'));
  }));
  // A picture pasted into the box goes to the desktop (no permission asked).
  panel.querySelector('#clipboard-text').addEventListener('paste', (ev) => {
    const file = [...(ev.clipboardData?.files || [])].find((f) => f.type.startsWith('image/'));
    if (!file) return;
    ev.preventDefault();
    if (!policy().toDesktop || busy) return;
    run(() => put(file));
  });

  get.addEventListener('click', () => run(async () => {
    const res = await fetch(url, { cache: 'no-store' }).catch((err) => err);
    if (res instanceof Error) { say(`The desktop's picture did not arrive: ${res.message}.`, 'error'); return; }
    if (!res.ok) { say(`No picture copied: ${await refusal(res)}`, 'error'); return; }
    const blob = await res.blob();
    if (shown.src) URL.revokeObjectURL(shown.src);
    shown.src = URL.createObjectURL(blob);
    shown.hidden = false;
    const copied = await navigator.clipboard?.write?.([new ClipboardItem({ 'image/png': blob })]).then(() => true, () => false);
    say(copied ? `Copied the desktop's picture (${blob.size} bytes) to this device's clipboard.`
      : "The desktop's picture is below; the browser did not let the page copy it: right-click it to copy.", copied ? 'ok' : 'warn');
  }));
  refresh();
  return refresh;
}
