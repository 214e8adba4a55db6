// A desktop that stopped under its console (it crashed, ran out of memory,
// an admin stopped it) is not a connection to retry: the page asks the
// portal what the desktop is doing, and when it is down the ended card
// says so in plain words and offers the way back, "Start it again" (a
// persistent desktop keeps its disk) or "Get a fresh desktop" (an
// ephemeral one is made anew), instead of reconnecting for ever.

import { errorText } from './connect.js';

// desktopDown resolves to the desktop (the desktop API's answer) when it
// is stopped or failed, else to null: running, starting, or not known (the
// portal unreachable, a viewer who may not read it), which a reconnect
// finds out.
export async function desktopDown(url) {
  const d = await desktopState(url);
  return d && (d.power === 'stopped' || d.power === 'failed') ? d : null;
}

// desktopGone reports whether the portal says the desktop is no longer
// the user's (403 or 404: released, reclaimed, deleted): an RDP console
// that ends this way hears no reason from its server.
export async function desktopGone(url) {
  try {
    const res = await fetch(url, { headers: { Accept: 'application/json' }, signal: AbortSignal.timeout(5000) });
    return res.status === 403 || res.status === 404;
  } catch {
    return false;
  }
}

// desktopState resolves to the desktop (the desktop API's answer), or to
// null when it is not known (the portal unreachable, a viewer who may not
// read it).
export async function desktopState(url) {
  try {
    const res = await fetch(url, { headers: { Accept: 'application/json' }, signal: AbortSignal.timeout(5000) });
    return res.ok ? await res.json() : null;
  } catch {
    return null;
  }
}

// fresh reports whether d's way back is a fresh desktop (an ephemeral
// pool's), not the same one started again.
export function fresh(d) {
  return d.mode === 'ephemeral';
}

// downWords is the ended card's title, reason and action for a desktop
// that is down.
export function downWords(d) {
  const title = d.power === 'failed' ? 'Your desktop stopped unexpectedly' : 'Your desktop is stopped';
  const why = d.power === 'failed' ? (d.reason || 'It stopped on its own.') : 'It was stopped.';
  const next = fresh(d)
    ? 'It was a fresh desktop for this session: a new one starts clean, and what was not saved elsewhere is gone.'
    : 'Its disk is kept: start it again to carry on with your files.';
  return { title, reason: `${why} ${next}`, action: fresh(d) ? 'Get a fresh desktop' : 'Start it again' };
}

// startAgain asks the portal to start d again (made fresh when ephemeral);
// it resolves to '' once started, else to what went wrong, in words.
export async function startAgain(url, d) {
  const res = await fetch(`${url}/${fresh(d) ? 'start-fresh' : 'start'}`, {
    method: 'POST', headers: { Accept: 'application/json' },
  }).catch(() => null);
  if (!res) return 'The portal cannot be reached. Try again in a moment.';
  if (res.ok) return '';
  const body = await res.json().catch(() => ({}));
  return errorText(res.status, body);
}
