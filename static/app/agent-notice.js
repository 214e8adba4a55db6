// The agent notice on the console page (views/console_agent.templ): an
// agent at work in this desktop with its holder's token, and the person's
// oversight of it. Take control pauses the agent's input until Hand back;
// Stop refuses its calls here until Let the agent go on. The state lives
// on the desktop's claim (POST …/oversight/{action} answers the desktop
// as it is after), so every replica's agent seat obeys it. An agent that
// starts after the page opened, and a take or stop made on another page
// of the desktop, show through the viewers' list.

import { errorText } from './connect.js';

// sayAgentState is the notice's line for a desktop's oversight state.
export function sayAgentState(control, stopped, revoked, me) {
  const who = (login) => (login === me ? 'You' : login);
  if (stopped && revoked) return `${who(stopped)} stopped it and revoked its token: it cannot work here again. Other agents are kept out too until they are let in.`;
  if (stopped) return `${who(stopped)} stopped it: its calls here are refused. Revoke its token on the Tokens page to stop it everywhere.`;
  if (control) return `${who(control)} took control: its input waits until ${control === me ? 'you hand' : 'they hand'} it back.`;
  return 'You see what it does.';
}

// attachAgentNotice wires the notice el; it returns seen(list), which
// shows the notice once the desktop's viewers (api.Viewer) include an
// agent.
export function attachAgentNotice(el) {
  if (!el) return () => {};
  const { me } = el.dataset;
  const state = el.querySelector('#agent-state');
  const buttons = el.querySelectorAll('button[data-action]');
  function show() {
    const { control, stopped } = el.dataset;
    const revoked = el.dataset.revoked === 'true';
    state.textContent = sayAgentState(control, stopped, revoked, me);
    // An agent whose token was revoked cannot go on: the same action lets
    // other agents in.
    const shown = {
      'agent-take': !control && !stopped, 'agent-hand-back': !!control && !stopped, 'agent-stop': !stopped,
      'agent-go-on': !!stopped && !revoked, 'agent-let-in': !!stopped && revoked,
    };
    for (const b of buttons) b.hidden = !shown[b.dataset.testid];
  }
  for (const b of buttons) {
    b.addEventListener('click', async () => {
      for (const x of buttons) x.disabled = true;
      try {
        const res = await fetch(`${el.dataset.url}/${b.dataset.action}`, { method: 'POST', headers: { Accept: 'application/json' } });
        const body = await res.json().catch(() => ({}));
        if (res.ok) {
          el.dataset.control = body.agentControl || '';
          el.dataset.stopped = body.agentStopped || '';
          el.dataset.revoked = String(!!body.agentRevoked);
          show();
        } else {
          state.textContent = errorText(res.status, body);
        }
      } catch {
        state.textContent = 'The portal cannot be reached; try again.';
      }
      for (const x of buttons) x.disabled = false;
    });
  }
  show();
  return (list) => {
    const agent = list.find((v) => v.role === 'agent');
    if (agent) {
      el.querySelector('#agent-name').textContent = agent.user;
      el.hidden = false;
    }
    if (el.hidden) return;
    // A take or stop made on another page (or replica) shows here too; an
    // agent not listed (its screen closed) is neither paused nor stopped,
    // or the list would name it so.
    el.dataset.control = agent?.agentControl || '';
    el.dataset.stopped = agent?.agentStopped || '';
    el.dataset.revoked = String(!!agent?.agentRevoked);
    show();
  };
}
