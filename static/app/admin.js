// The admin dashboard: refreshes its live part every few seconds while the
// tab is visible (fetch and swap, server-rendered), and runs the row and
// pool actions through the JSON API after a confirmation dialog.
import { parseSchedule, parseStandby } from './standby.js';
import { errorText } from './connect.js';

const live = document.getElementById('live');
const status = document.getElementById('admin-status');
const REFRESH_MS = 5000;

function say(text, kind = '') {
  status.textContent = text;
  status.dataset.kind = kind;
}

function anyDialogOpen() {
  return Boolean(document.querySelector('dialog[open]'));
}

// refresh swaps the live part; focus stays on the same control when it
// still exists (matched by its action and desktop or pool).
async function refresh() {
  if (document.hidden || anyDialogOpen()) return;
  const res = await fetch(live.dataset.refresh, { headers: { Accept: 'text/html' } }).catch(() => null);
  if (!res || !res.ok) {
    say('Could not refresh the dashboard; retrying.', 'error');
    return;
  }
  const html = await res.text();
  const focused = document.activeElement;
  const key = focused && live.contains(focused) ? focusKey(focused) : null;
  live.innerHTML = html; // the portal's own rendering, escaped by templ
  // The same control again, else the first one of its row or pool (an
  // action may swap the row's buttons, e.g. Assign for Force-release).
  if (key) (live.querySelector(key.control) || live.querySelector(`${key.scope} button, ${key.scope} a`))?.focus();
  live.dataset.refreshedAt = String(Date.now());
}

// focusKey returns selectors for el and for its row or pool, to find them
// again in a re-rendered live part.
function focusKey(el) {
  const row = el.closest('[data-desktop]');
  const pool = el.closest('[data-pool]');
  const scope = row ? `[data-desktop="${CSS.escape(row.dataset.desktop)}"]` : pool ? `[data-pool="${CSS.escape(pool.dataset.pool)}"]` : '';
  if (!scope || !el.dataset.testid) return null;
  return { scope, control: `${scope} [data-testid="${CSS.escape(el.dataset.testid)}"]` };
}

async function callAPI(method, url, body) {
  const res = await fetch(url, {
    method,
    headers: { Accept: 'application/json', 'Content-Type': 'application/json' },
    body: body ? JSON.stringify(body) : undefined,
  });
  const answer = await res.json().catch(() => ({}));
  if (!res.ok) {
    throw new Error(errorText(res.status, answer));
  }
  return answer;
}

// The action dialog: one for every row and pool button.
const dialog = document.getElementById('action-dialog');
const form = document.getElementById('action-form');
const field = document.getElementById('action-field');
const input = document.getElementById('action-input');
const errorBox = document.getElementById('action-error');
const check = document.getElementById('action-check'); // an action's yes/no option (Stop: revoke the token too)
const checkInput = document.getElementById('action-check-input');
let pending = null;
let opener = null;

// What each row and pool button does: its request, question and input.
// d is the row's desktop ({ ns, name, holder }) or the pool ({ ns, pool, size }).
const desktopURL = (d, verb) => `/api/vdi/desktops/${encodeURIComponent(d.ns)}/${encodeURIComponent(d.name)}/${verb}`;
const poolURL = (d) => `/api/vdi/pools/${encodeURIComponent(d.ns)}/${encodeURIComponent(d.pool)}`;
const actions = {
  start: { url: (d) => desktopURL(d, 'start'), title: (d) => `Start ${d.name}?` },
  stop: { url: (d) => desktopURL(d, 'stop'), title: (d) => `Stop ${d.name}? Unsaved work in it is lost.` },
  release: {
    url: (d) => desktopURL(d, 'release'),
    title: (d) => `Force-release ${d.name} from ${d.holder}? Their console closes with your reason.`,
    input: 'reason', label: (d) => `Reason (shown to ${d.holder})`,
  },
  assign: {
    url: (d) => desktopURL(d, 'assign'), title: (d) => `Assign ${d.name} to a user`,
    input: 'user', label: () => 'User login', required: true,
  },
  recreate: { url: (d) => desktopURL(d, 'recreate'), title: (d) => `Recreate ${d.name} from its source? Its home is wiped.` },
  resize: {
    method: 'PATCH', url: poolURL, title: (d) => `Resize pool ${d.pool}`,
    input: 'size', type: 'number', value: (d) => d.size, label: () => 'New size (claimed desktops are never removed)',
  },
  'delete-pool': { method: 'DELETE', url: poolURL, title: (d) => `Delete pool ${d.pool} and all its desktops?` },
  'cancel-job': {
    url: (d) => `${poolURL(d)}/job/cancel`,
    title: (d) => `Cancel the job of pool ${d.pool}? Clones already under way go on and make their desktops.`,
  },
  access: {
    method: 'PATCH', url: poolURL, title: (d) => `Who may use pool ${d.pool}?`,
    input: 'access', value: (d) => d.access, build: (v) => ({ access: parseAccess(v) }),
    label: () => 'Logins and group:NAME, comma-separated; empty for everyone signed in. Desktops already held stay with their holders.',
  },
  standby: {
    method: 'PATCH', url: poolURL, title: (d) => `Free desktops of pool ${d.pool} kept on`,
    input: 'standby', value: (d) => d.standby, build: (v) => ({ standby: parseStandby(v) }),
    label: () => 'Warm standby: free desktops kept powered on for instant claims (0: none), or MIN-MAX (e.g. 1-20) to follow recent claims',
  },
  schedule: {
    method: 'PATCH', url: poolURL, title: (d) => `Working hours of pool ${d.pool}`,
    input: 'schedule', value: (d) => d.schedule, build: (v) => ({ standbySchedule: parseSchedule(v) }),
    label: () => 'Keep at least N desktops on in these hours: DAYS HH:MM-HH:MM N [ZONE], e.g. mon-fri 08:00-18:00 10 Europe/Berlin (empty: none)',
  },
  'agent-take': {
    url: (d) => desktopURL(d, 'oversight/take'),
    title: (d) => `Take control of ${d.name} from ${d.agent}? Its input waits until you hand back.`,
  },
  'agent-hand-back': { url: (d) => desktopURL(d, 'oversight/hand-back'), title: (d) => `Hand ${d.name} back to ${d.agent}?` },
  'agent-stop': {
    url: (d) => desktopURL(d, 'oversight/stop'),
    title: (d) => `Stop ${d.agent} in ${d.name}? Its calls are refused until someone lets it go on.`,
    check: (d) => `Revoke its token too: ${d.agent} can no longer act anywhere as ${d.holder}`,
    build: (_, revoke) => (revoke ? { revokeToken: true } : undefined),
  },
  'agent-go-on': {
    url: (d) => desktopURL(d, 'oversight/go-on'),
    title: (d) => (d.revoked ? `Let other agents in to ${d.name}? ${d.agent} stays out: its token is revoked.` : `Let ${d.agent} go on in ${d.name}?`),
  },
  limit: {
    method: 'PATCH', url: poolURL, title: (d) => `Desktops one user may hold of pool ${d.pool}`,
    input: 'limit', type: 'number', value: (d) => d.perUser, build: (v) => ({ limits: { desktopsPerUser: Number(v) } }),
    label: () => 'Desktops per user (0: no limit beyond the portal\'s own)',
  },
};

// done says, in a sentence, what an action did.
const done = {
  start: (d) => `${d.label} started.`,
  stop: (d) => `${d.label} stopped.`,
  release: (d) => `${d.label} released from ${d.holder}.`,
  assign: (d) => `${d.label} assigned.`,
  recreate: (d) => `${d.label} recreated from its source.`,
  resize: (d) => `Pool ${d.pool} resized.`,
  'delete-pool': (d) => `Pool ${d.pool} deleted.`,
  'cancel-job': (d) => `The job of pool ${d.pool} was cancelled.`,
  access: (d) => `Who may use pool ${d.pool}: saved.`,
  standby: (d) => `Warm standby of pool ${d.pool}: saved.`,
  schedule: (d) => `Working hours of pool ${d.pool}: saved.`,
  limit: (d) => `Per-user limit of pool ${d.pool}: saved.`,
  'agent-take': (d) => `You have control of ${d.label}: ${d.agent} waits.`,
  'agent-hand-back': (d) => `${d.label} handed back to ${d.agent}.`,
  'agent-stop': (d) => `${d.agent} stopped in ${d.label}.`,
  'agent-go-on': (d) => (d.revoked ? `Other agents may work in ${d.label}.` : `${d.agent} goes on in ${d.label}.`),
};

// parseAccess reads "group:finance, alice@example.com" as an access list.
function parseAccess(text) {
  const access = { users: [], groups: [] };
  for (const entry of text.split(',').map((s) => s.trim()).filter(Boolean)) {
    if (entry.startsWith('group:')) access.groups.push(entry.slice(6).trim());
    else access.users.push(entry);
  }
  return access;
}

// subject returns what a button acts on, read from its row or pool.
function subject(button) {
  const row = button.closest('[data-desktop]');
  if (row) {
    const [ns, name] = row.dataset.desktop.split('/');
    return { ns, name, holder: row.dataset.holder, agent: row.dataset.agent, revoked: 'agentRevoked' in row.dataset, label: row.dataset.desktop };
  }
  const pool = button.closest('[data-pool]');
  return {
    ns: pool.dataset.ns, pool: pool.dataset.pool, size: pool.dataset.size, label: pool.dataset.pool,
    access: pool.dataset.access, perUser: pool.dataset.perUser, standby: pool.dataset.standby,
    schedule: pool.dataset.schedule,
  };
}

live.addEventListener('click', (ev) => {
  const button = ev.target.closest('button[data-action]');
  const action = button && actions[button.dataset.action];
  if (!action) return;
  const d = subject(button);
  pending = {
    method: action.method || 'POST', url: action.url(d), title: action.title(d), input: action.input, inputType: action.type, build: action.build,
    check: Boolean(action.check),
    done: (done[button.dataset.action] || ((x) => `${button.textContent.trim()} ${x.label}: done.`))(d),
  };
  opener = button;
  document.getElementById('action-title').textContent = pending.title;
  errorBox.textContent = '';
  field.hidden = !action.input;
  input.value = action.value ? action.value(d) : '';
  input.type = action.type || 'text';
  input.required = Boolean(action.required);
  document.getElementById('action-label').textContent = action.label ? action.label(d) : '';
  check.hidden = !action.check;
  checkInput.checked = false;
  document.getElementById('action-check-label').textContent = action.check ? action.check(d) : '';
  dialog.showModal();
  (action.input ? input : form.querySelector('[data-testid=dialog-confirm]')).focus();
});

function body(p) {
  if (p.check) return p.build('', checkInput.checked);
  if (!p.input) return undefined;
  const v = input.value.trim();
  if (p.build) return p.build(v);
  return { [p.input]: p.inputType === 'number' ? Number(v) : v };
}

form.addEventListener('submit', async (ev) => {
  ev.preventDefault();
  if (!pending) return;
  const confirmButton = form.querySelector('[data-testid=dialog-confirm]');
  confirmButton.disabled = true;
  errorBox.textContent = '';
  try {
    await callAPI(pending.method, pending.url, body(pending));
    dialog.close();
    say(pending.done, 'ok');
    pending = null;
    await refresh();
    if (opener && !document.contains(opener)) opener = null;
  } catch (err) {
    errorBox.textContent = err.message;
  } finally {
    confirmButton.disabled = false;
  }
});

// The pool dialog: New pool creates one; a pool's Policy button edits
// that pool's reclaim and console policy in the same dialog (PATCH,
// audited as pool-policy), with what only a new pool sets hidden.
const poolDialog = document.getElementById('pool-dialog');
const poolForm = document.getElementById('pool-form');
const poolTitle = document.getElementById('pool-title');
let editing = null; // { ns, pool, policy } while the dialog edits a pool's policy

// fileWays maps the Files select to the API's fileTransfer and back.
const fileWays = { both: true, off: false, upload: { upload: true, download: false }, download: { upload: false, download: true } };
function fileWayOf(ft) {
  if (ft === undefined || ft === true) return 'both';
  if (ft === false) return 'off';
  if (ft.upload && ft.download) return 'both';
  return ft.upload ? 'upload' : ft.download ? 'download' : 'off';
}

function openPoolDialog(edit, policy) {
  editing = edit && { ...edit, policy: policy || {} };
  poolForm.reset();
  poolForm.dataset.mode = edit ? 'edit' : 'create';
  for (const fs of poolForm.querySelectorAll('.create-only')) fs.disabled = Boolean(edit);
  poolTitle.textContent = edit ? `Policy of pool ${edit.pool}` : 'New pool';
  poolForm.querySelector('[data-testid=pool-create]').textContent = edit ? 'Save' : 'Create';
  if (policy) {
    const f = poolForm.elements;
    for (const k of ['disconnectGrace', 'idleTimeout', 'maxSession', 'clipboard', 'watch', 'network']) if (f[k]) f[k].value = policy[k] || f[k].value;
    for (const k of ['audio', 'record', 'recordInput', 'ownRecordings']) if (f[k]) f[k].checked = policy[k] !== undefined ? Boolean(policy[k]) : k === 'audio';
    if (f.fileTransfer?.type === 'checkbox') f.fileTransfer.checked = fileWayOf(policy.fileTransfer) !== 'off';
    else if (f.fileTransfer) f.fileTransfer.value = fileWayOf(policy.fileTransfer);
  }
  poolForm.querySelector('[data-testid=pool-error]').textContent = '';
  poolDialog.showModal();
  (edit ? poolForm.elements.disconnectGrace : poolForm.elements.name).focus();
}

// policyOf reads the dialog's policy fields in the API's shape, over the
// pool's policy as it was (base): a PATCH replaces the whole policy, so
// what the dialog does not show (or shows coarser, like RDP's one file
// transfer box over a one-way policy) must go back as it came.
function policyOf(f, base = {}) {
  return {
    ...base,
    disconnectGrace: f.disconnectGrace.value.trim(), idleTimeout: f.idleTimeout.value.trim(), maxSession: f.maxSession.value.trim(),
    clipboard: f.clipboard.value, fileTransfer: fileTransferOf(f, base), audio: f.audio ? f.audio.checked : true, record: f.record.checked,
    recordInput: f.recordInput.checked, ownRecordings: f.ownRecordings.checked, watch: f.watch.value,
    network: f.network ? f.network.value : base.network || '',
  };
}

// fileTransferOf reads the Files select, or the RDP box, which keeps a
// one-way policy as long as it stays on.
function fileTransferOf(f, base) {
  const el = f.fileTransfer;
  if (!el) return base.fileTransfer ?? true;
  if (el.type !== 'checkbox') return fileWays[el.value];
  return el.checked === (fileWayOf(base.fileTransfer) !== 'off') && base.fileTransfer !== undefined ? base.fileTransfer : el.checked;
}

document.querySelector('[data-open=pool-dialog]').addEventListener('click', (ev) => { opener = ev.currentTarget; openPoolDialog(null); });
live.addEventListener('click', (ev) => {
  const b = ev.target.closest('[data-edit-pool]');
  if (!b) return;
  const card = b.closest('[data-pool]');
  opener = b;
  openPoolDialog({ ns: card.dataset.ns, pool: card.dataset.pool }, JSON.parse(b.dataset.policy || '{}'));
});
poolForm.addEventListener('submit', async (ev) => {
  ev.preventDefault();
  const f = poolForm.elements;
  const submit = poolForm.querySelector('[data-testid=pool-create]');
  const label = submit.textContent;
  submit.disabled = true;
  submit.textContent = editing ? 'Saving…' : 'Creating…';
  try {
    if (editing) {
      await callAPI('PATCH', `/api/vdi/pools/${encodeURIComponent(editing.ns)}/${encodeURIComponent(editing.pool)}`, { policy: policyOf(f, editing.policy) });
      say(`Policy of pool ${editing.pool} saved.`, 'ok');
    } else {
      await callAPI('POST', '/api/vdi/pools', {
        name: f.name.value.trim(),
        size: Number(f.size.value),
        mode: f.mode.value,
        kind: f.kind.value,
        namespace: f.namespace?.value.trim() || '',
        source: f.source?.value.trim() || '',
        licensesAcknowledged: Boolean(f.licensesAcknowledged?.checked),
        access: parseAccess(f.access.value),
        limits: { desktopsPerUser: Number(f.perUser.value || 0) },
        standby: parseStandby(f.standby.value),
        policy: policyOf(f),
      });
      say(`Pool ${f.name.value.trim()} created.`, 'ok');
    }
    poolDialog.close();
    poolForm.reset();
    await refresh();
  } catch (err) {
    poolForm.querySelector('[data-testid=pool-error]').textContent = err.message;
  } finally {
    submit.disabled = false;
    submit.textContent = label;
  }
});

for (const d of [dialog, poolDialog]) {
  d.querySelector('[data-close]').addEventListener('click', () => d.close());
  // Give focus back to what opened the dialog (or the page) when it closes.
  d.addEventListener('close', () => {
    if (opener && document.contains(opener)) opener.focus();
  });
}

// A thumbnail that cannot be taken (the desktop is starting or just
// stopped) shows the empty placeholder instead of a broken image.
live.addEventListener('error', (ev) => {
  if (ev.target.tagName === 'IMG') ev.target.replaceWith(Object.assign(document.createElement('span'), { className: 'thumb-off' }));
}, true);

setInterval(refresh, REFRESH_MS);
document.addEventListener('visibilitychange', () => { if (!document.hidden) refresh(); });
