// The reclaim banner: warns the holder before an idle or max-session
// reclaim with a live countdown. Idle warnings go away by themselves when
// the user works again (the portal sees the input and moves the deadline).
// The deadline is asked for again when its warning is due (an idle one
// may have moved later meanwhile), every few seconds while the warning is
// up, and otherwise every few minutes, for a policy an admin changes: a
// console at rest does not ask every few seconds (issue 56).
const WARN_BEFORE_MS = 5 * 60 * 1000;
// QUIET_MS is the longest wait between two asks; WARNING_MS the wait while
// the warning is up; EARLY_MS how much before a warning is due it is asked.
const QUIET_MS = 5 * 60 * 1000;
const WARNING_MS = 2000;
const EARLY_MS = 2000;

const messages = {
  idle: (left) => `No input for a while: this desktop will be reclaimed in ${left} unless you use it.`,
  'max-session': (left) => `This session reaches its time limit in ${left}; save your work. The desktop will then be reclaimed.`,
};

function fmt(ms) {
  const s = Math.max(0, Math.ceil(ms / 1000));
  const m = Math.floor(s / 60);
  return m > 0 ? `${m}:${String(s % 60).padStart(2, '0')} min` : `${s} s`;
}

export function watchReclaim(banner, desktopURL) {
  let deadline = null;
  let timer = null;

  function render() {
    if (!deadline || !messages[deadline.rule]) {
      banner.hidden = true;
      return;
    }
    const left = new Date(deadline.at).getTime() - Date.now();
    if (left > WARN_BEFORE_MS) {
      banner.hidden = true;
      return;
    }
    banner.textContent = messages[deadline.rule](fmt(left));
    banner.dataset.rule = deadline.rule;
    banner.hidden = false;
  }

  async function poll() {
    try {
      const res = await fetch(desktopURL, { headers: { Accept: 'application/json' } });
      deadline = res.ok ? (await res.json()).reclaim || null : null;
    } catch {
      // Network trouble: keep the last known deadline.
    }
    render();
    clearTimeout(timer);
    timer = setTimeout(poll, nextAsk());
  }

  // nextAsk is how long to wait before asking for the deadline again.
  function nextAsk() {
    // Faster while the warning is up, so that activity clears it promptly.
    if (!banner.hidden) return WARNING_MS;
    if (!deadline) return QUIET_MS;
    const due = new Date(deadline.at).getTime() - WARN_BEFORE_MS - EARLY_MS - Date.now();
    return Math.min(QUIET_MS, Math.max(WARNING_MS, due));
  }

  setInterval(render, 1000);
  poll();
}
