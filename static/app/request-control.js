// Request control: an admin watching a desktop asks its holder for
// control, to help. The portal waits (up to CONTROL_S) for the holder's
// Allow or Refuse on their console page and answers with a grant, which
// the page gives to the screen's websocket when it opens it again.

import { errorText } from './connect.js';

// CONTROL_S is how long the portal waits for the holder (handlers/control.go).
const CONTROL_S = 45;

// attachRequestControl wires the button: onGrant(grant) runs when the
// holder allowed; status says what happens meanwhile. It returns
// show(on), which offers the button or takes it away.
export function attachRequestControl(button, status, holder, onGrant) {
  if (!button) return () => {};
  let asking = false;
  button.addEventListener('click', async () => {
    if (asking) return;
    asking = true;
    button.disabled = true;
    const until = Date.now() + CONTROL_S * 1000;
    const say = () => {
      const left = Math.max(0, Math.ceil((until - Date.now()) / 1000));
      status.textContent = `Waiting for ${holder} to allow control (${left} s)…`;
      status.dataset.kind = 'busy'; // not Connected's green
    };
    say();
    const timer = setInterval(say, 1000);
    let res = null;
    let body = {};
    try {
      res = await fetch(button.dataset.url, { method: 'POST', headers: { Accept: 'application/json' } });
      body = await res.json().catch(() => ({}));
    } catch { /* the portal is away: said below */ }
    clearInterval(timer);
    asking = false;
    button.disabled = false;
    if (res?.ok && body.grant) {
      onGrant(body.grant);
      return;
    }
    status.textContent = res ? errorText(res.status, body) : 'The portal cannot be reached.';
    status.dataset.kind = 'error'; // a refusal read in green looked granted
  });
  return (on) => { button.hidden = !on; };
}
