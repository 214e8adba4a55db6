// The oversight of an agent at work in one of the user's desktops, on the
// home page (views/agent_oversight.templ): Take control, Hand back, Stop
// (with, when ticked, its token revoked) and Let the agent go on, sent to
// POST …/oversight/{action} as the console page's notice sends them; the
// page is then shown again as the desktop now is.

import { errorText } from './connect.js';

for (const box of document.querySelectorAll('[data-testid=agent-box]')) {
  const error = box.querySelector('[data-testid=agent-error]');
  const revoke = box.querySelector('input[name=revokeToken]');
  const buttons = box.querySelectorAll('button[data-oversight]');
  for (const b of buttons) {
    b.addEventListener('click', async () => {
      const action = b.dataset.oversight;
      const body = action === 'stop' && revoke?.checked ? JSON.stringify({ revokeToken: true }) : undefined;
      for (const x of buttons) x.disabled = true;
      error.hidden = true;
      try {
        const res = await fetch(`${box.dataset.url}/${action}`, {
          method: 'POST',
          headers: { Accept: 'application/json', 'Content-Type': 'application/json' },
          body,
        });
        if (res.ok) {
          window.location.reload();
          return;
        }
        const answer = await res.json().catch(() => ({}));
        error.textContent = errorText(res.status, answer);
      } catch {
        error.textContent = 'The portal cannot be reached; try again.';
      }
      error.hidden = false;
      for (const x of buttons) x.disabled = false;
    });
  }
}
