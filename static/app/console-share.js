// The holder's Share panel: invite a colleague by login to this desktop's
// screen (view only, or able to type and point) for a while, see the
// invitations and revoke them. The portal keeps the rules (who may be
// invited, for how long, how many); this page only says what happened.
// The invited colleague opens the link and signs in as anywhere; the
// watchers notice above the desktop shows them while they are there.
const panel = document.getElementById('share-panel');
const toggle = document.getElementById('share-toggle');
const form = document.getElementById('share-form');
const note = document.getElementById('share-note');
const list = document.getElementById('share-list');
const url = panel.dataset.shares;

function say(parts, kind) {
  note.replaceChildren(...parts);
  note.dataset.kind = kind || '';
}

function show(open) {
  panel.hidden = !open;
  toggle.setAttribute('aria-pressed', String(open));
  if (open) {
    refresh();
    document.getElementById('share-user').focus();
  }
}

toggle.addEventListener('click', () => show(panel.hidden));
document.getElementById('share-close').addEventListener('click', () => show(false));

// errorOf reads the portal's {error, hint} answer as one sentence.
async function errorOf(res) {
  const body = await res.json().catch(() => ({}));
  return body.error ? [body.error, body.hint].filter(Boolean).join(' ') : `The portal answered ${res.status}.`;
}

// call fetches, and says what went wrong when the portal cannot be
// reached or refuses; it returns the response only when it is ok.
async function call(input, init) {
  const res = await fetch(input, init).catch(() => null);
  if (!res) say(['The portal cannot be reached.'], 'error');
  else if (!res.ok) say([await errorOf(res)], 'error');
  return res && res.ok ? res : null;
}

const time = (iso) => new Date(iso).toLocaleTimeString([], { hour: '2-digit', minute: '2-digit' });
const role = (s) => (s.control ? 'may type and point' : 'view only');

// link is the invitation's link; from a terminal or serial console it
// opens that console (the one the holder has open) rather than the screen.
function link(share) {
  const u = new URL(share.url, location.href);
  const open = document.getElementById('screen')?.dataset.protocol;
  if (open === 'terminal' || open === 'serial') u.searchParams.set('protocol', open);
  const href = u.href;
  const a = Object.assign(document.createElement('a'), { href, textContent: href });
  a.dataset.testid = 'share-link';
  const copy = Object.assign(document.createElement('button'), { type: 'button', textContent: 'Copy link' });
  copy.addEventListener('click', async () => {
    try {
      await navigator.clipboard.writeText(href);
      copy.textContent = 'Copied';
    } catch {
      copy.textContent = 'Select the link to copy it';
    }
  });
  return [a, ' ', copy];
}

async function refresh() {
  const res = await call(url, { headers: { Accept: 'application/json' } });
  if (!res) return;
  const shares = await res.json();
  list.replaceChildren(...shares.map((s) => {
    const li = document.createElement('li');
    li.dataset.testid = 'share-row';
    const revoke = Object.assign(document.createElement('button'), { type: 'button', textContent: 'Revoke' });
    revoke.dataset.testid = 'share-revoke';
    revoke.addEventListener('click', async () => {
      revoke.disabled = true;
      if (await call(`${url}/${encodeURIComponent(s.id)}`, { method: 'DELETE' })) say([`${s.user} can no longer see this desktop.`], 'ok');
      refresh();
    });
    // Control is handed over and taken back in one click; the colleague's
    // page reopens with the new role.
    const hand = Object.assign(document.createElement('button'), { type: 'button', textContent: s.control ? 'Take control back' : 'Give control' });
    hand.dataset.testid = 'share-hand';
    hand.addEventListener('click', async () => {
      hand.disabled = true;
      const r = await call(`${url}/${encodeURIComponent(s.id)}`, {
        method: 'PATCH', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ control: !s.control }),
      });
      if (r) say([s.control ? `${s.user} watches again (view only).` : `${s.user} may type and point now.`], 'ok');
      refresh();
    });
    const actions = Object.assign(document.createElement('span'), { className: 'share-actions' });
    actions.append(hand, revoke);
    li.append(`${s.user}, ${role(s)}, until ${time(s.expires)} `, actions);
    return li;
  }));
  if (!shares.length) list.replaceChildren();
}

form.addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const body = {
    user: form.elements.user.value.trim(),
    control: form.elements.control.checked,
    expires: form.elements.expires.value,
  };
  const res = await call(url, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
  if (!res) return;
  const share = await res.json();
  say([`Invited ${share.user} (${role(share)}) until ${time(share.expires)}. Send them this link: `, ...link(share)], 'ok');
  form.elements.user.value = '';
  refresh();
});
