// The watched user's notice: who else has this desktop's console open (an
// admin watching, view only, or helping with control), live, and where the
// pool's policy asks for consent, Allow and Refuse for a watch that waits. It long-polls
// GET …/viewers with If-None-Match: the portal answers as soon as the list
// changes, so the notice shows within a second of the watch starting.

const RETRY_MS = 3000;

// REWATCH_MS is how long after the holder took control back from an admin
// their page allows that admin's watch reopening (watchViewers).
const REWATCH_MS = 60000;

// sayViewers is the notice for a list of viewers, or '' for none.
export function sayViewers(list) {
  list = list.filter((v) => v.role !== 'asks' && v.role !== 'agent'); // the agent has its own notice
  if (!list.length) return '';
  const users = (role) => [...new Set(list.filter((v) => v.role === role).map((v) => v.user))];
  const [watch, control, listen] = [users('watch'), users('control'), users('listen')];
  const and = (names) => (names.length > 1 ? `${names.slice(0, -1).join(', ')} and ${names.at(-1)}` : names[0]);
  const parts = [];
  if (watch.length) parts.push(`${and(watch)} ${watch.length > 1 ? 'are' : 'is'} watching this desktop (view only)`);
  if (control.length) parts.push(`${and(control)} ${control.length > 1 ? 'have' : 'has'} a console of it open and can type in it`);
  if (listen.length) parts.push(`${and(listen)} ${listen.length > 1 ? 'are' : 'is'} listening to its sound`);
  return `${parts.join('; ')}.`;
}

// pollViewers calls show with the desktop's viewers at url, and again at
// each change, until the page goes or the desktop is no longer the
// user's to ask about (403, 404: released, revoked; the console says so).
export function pollViewers(url, show) {
  let etag = '';
  async function poll() {
    try {
      const res = await fetch(url, { headers: { Accept: 'application/json', ...(etag ? { 'If-None-Match': etag } : {}) } });
      if (res.status === 200) {
        etag = res.headers.get('ETag') || '';
        show(await res.json());
      } else if (res.status === 403 || res.status === 404) {
        return;
      } else if (res.status !== 304) {
        throw new Error(`status ${res.status}`);
      }
      poll();
    } catch {
      setTimeout(poll, RETRY_MS); // the portal is away: the console says so
    }
  }
  poll();
}

// sayParticipants is the line a viewer beside the holder sees: everyone on
// the desktop, the holder first, "you" marked.
export function sayParticipants(holder, me, list) {
  const roles = new Map();
  for (const v of list) {
    if (v.role === 'asks') continue;
    const role = { watch: 'view only', listen: 'listening', agent: 'agent' }[v.role] || 'can type';
    if (roles.get(v.user) !== 'can type' && !(role === 'listening' && roles.has(v.user))) roles.set(v.user, role);
  }
  const people = holder ? [`${holder} (holder)`] : [];
  for (const [user, role] of roles) people.push(`${user} (${user === me ? 'you, ' : ''}${role})`);
  return people.length ? `On it: ${people.join(', ')}` : '';
}

// watchViewers keeps the holder's notice up to date from url until the
// page goes; onList, when given, sees each list too. On the page of
// someone beside the holder (me is not holder: an admin's serial console)
// it says only who is on the desktop, the holder named, with no answers
// to give: those are the holder's.
export function watchViewers(notice, url, onList, holder = '', me = '') {
  if (!url) return;
  if (holder && me && holder !== me) {
    pollViewers(url, (list) => {
      onList?.(list);
      notice.textContent = sayParticipants(holder, me, list);
      notice.hidden = !notice.textContent;
    });
    return;
  }
  // Taking control back is not ending the watch: the admin's page reopens
  // watching, and where the pool asks the holder's consent that watch
  // asks again. The holder allowed it already; their page answers it.
  const tookBack = new Map(); // user -> when the holder took control back
  const answered = new Set(); // the asks answered so
  const rewatch = (v) => {
    if (v.wants !== 'watch' || !(Date.now() - (tookBack.get(v.user) ?? -Infinity) < REWATCH_MS)) return false;
    if (!answered.has(v.id)) {
      answered.add(v.id);
      fetch(`${url}/${encodeURIComponent(v.id)}/allow`, { method: 'POST' }).catch(() => {});
    }
    return true;
  };
  pollViewers(url, (list) => {
    onList?.(list);
    const text = sayViewers(list);
    // The holder's own "On it:" line, as the people beside them have.
    const on = text ? [Object.assign(document.createElement('span'), {
      className: 'watch-participants', textContent: sayParticipants('you', '', list),
    })] : [];
    on.forEach((el) => { el.dataset.testid = 'holder-participants'; });
    notice.replaceChildren(...(text ? [text] : []), ...on, ...list.filter((v) => v.granted).map((v) => takeBack(v)),
      ...list.filter((v) => v.role === 'asks' && !rewatch(v)).map((v) => ask(v)));
    notice.hidden = notice.childNodes.length === 0;
  });

  // takeBack ends the control the holder gave an admin (Request control):
  // their console reopens watching, view only.
  function takeBack(v) {
    const b = Object.assign(document.createElement('button'), { type: 'button', textContent: `Take back control from ${v.user}` });
    b.dataset.testid = 'take-back-control';
    b.addEventListener('click', () => {
      b.disabled = true;
      tookBack.set(v.user, Date.now());
      fetch(`${url}/${encodeURIComponent(v.id)}/end`, { method: 'POST' }).catch(() => { b.disabled = false; });
    });
    return b;
  }

  // ask is a watch waiting for the holder's consent (the pool's policy),
  // with the holder's two answers.
  function ask(v) {
    const row = Object.assign(document.createElement('span'), { className: 'watch-ask' });
    row.dataset.testid = 'watch-ask';
    const what = {
      watch: 'watch this desktop (view only)',
      'request-control': 'take control of this desktop to help you (they could type and use the mouse)',
    }[v.wants] || 'open a console of this desktop (they could type in it)';
    row.append(`${v.user} asks to ${what}. `);
    for (const [answer, label] of [['allow', 'Allow'], ['refuse', 'Refuse']]) {
      const b = Object.assign(document.createElement('button'), { type: 'button', textContent: label });
      b.dataset.testid = `watch-${answer}`;
      b.addEventListener('click', () => {
        row.remove();
        fetch(`${url}/${encodeURIComponent(v.id)}/${answer}`, { method: 'POST' }).catch(() => {});
      });
      row.append(b);
    }
    return row;
  }
}
