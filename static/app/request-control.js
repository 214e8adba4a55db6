// Request control: an admin watching a desktop asks its holder for
// control, to help. The portal waits (up to CONTROL_S) for the holder's
// Allow or Refuse on their console page and answers with a grant, which
// the page gives to the screen's websocket when it opens it again.

import { errorText } from './connect.js';

// CONTROL_S is how long the portal waits for the holder (handlers/control.go).
const CONTROL_S = 45;

// attachRequestControl wires the button: onGrant(grant) runs when the
// holder allowed; notice (views/admin_shadow.templ) says what happens
// meanwhile and what the holder answered, under the bar, until
// dismissed. It returns show(on), which offers the button or takes it
// away.
export function attachRequestControl(button, notice, holder, onGrant) {
  if (!button) return () => {};
  const words = notice.querySelector('span');
  const tell = (text, kind) => {
    words.textContent = text;
    notice.dataset.kind = kind;
    notice.hidden = false;
  };
  let asking = false;
  button.addEventListener('click', async () => {
    if (asking) return;
    asking = true;
    button.disabled = true;
    const until = Date.now() + CONTROL_S * 1000;
    const say = () => {
      const left = Math.max(0, Math.ceil((until - Date.now()) / 1000));
      tell(`Waiting for ${holder} to allow control (${left} s)…`, 'busy');
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
      notice.hidden = true;
      onGrant(body.grant);
      return;
    }
    tell(res ? errorText(res.status, body) : 'The portal cannot be reached.', 'error');
  });
  return (on) => { button.hidden = !on; };
}
