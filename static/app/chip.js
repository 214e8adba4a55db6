// The console's connection chip: the relay path the portal takes to the
// desktop (direct, through a peer portal, through the API server), the
// round trip to the portal (a small request timed when the console opens,
// then every few seconds while the user works in the page or reads the
// chip: a page at rest sends nothing, issue 56) and how many screen
// updates arrived in the last second, with a short "why slow?" hint as
// its title when a figure is poor.

const EVERY_MS = 5000;
// ACTIVE_MS is how long after the user's last input the round trip is
// still timed.
const ACTIVE_MS = 30000;
const SLOW_RTT_MS = 150;

const paths = { direct: 'direct', peer: 'via a peer portal', apiserver: 'via the API server' };

// slowHint says why a link may feel slow, or '' when nothing stands out.
export function slowHint(path, rtt) {
  if (rtt > SLOW_RTT_MS) return `Slow: ${Math.round(rtt)} ms to the portal. A wired network, or a portal nearer to you, helps.`;
  if (path === 'apiserver') return 'The desktop is reached through the Kubernetes API server, the slowest path: the portal cannot reach it directly.';
  if (path === 'peer') return 'The desktop is reached through another portal, one hop more than direct.';
  return '';
}

// attachChip keeps chip (a dot: green, amber when slow) up to date, its
// figures in its title and label, and shown in full by a click or a tap
// (the details element after it); linkURL answers the path, updates()
// returns the screen updates counted since the last call. It returns
// { again, close }.
export function attachChip(chip, linkURL, updates) {
  const details = document.getElementById('chip-details');
  let timer;
  let path = '';
  let rtt = 0;
  const open = (on) => {
    details.hidden = !on;
    chip.setAttribute('aria-expanded', String(on));
  };
  chip.addEventListener('click', (ev) => {
    ev.stopPropagation();
    open(details.hidden);
  });
  document.addEventListener('click', (ev) => {
    if (!details.hidden && !ev.target.closest('.chip-wrap')) open(false);
  });
  let lastInput = -Infinity;
  const used = () => { lastInput = performance.now(); };
  // Captured on the window, so a console that stops its events' way up
  // (noVNC, IronRDP) still counts as use.
  for (const type of ['keydown', 'pointerdown', 'pointermove', 'wheel', 'touchstart']) {
    window.addEventListener(type, used, { capture: true, passive: true });
  }
  const wanted = () => !details.hidden || (!document.hidden && performance.now() - lastInput < ACTIVE_MS);
  let timing = false; // a request is on its way: it sets the next timer
  let asked = false; // timing now was asked for while one was on its way
  async function measure(now = false) {
    if (timing) {
      // Its answer may be from before the console opened (a busy page
      // or portal): time again once it is in.
      asked ||= now;
      return;
    }
    clearTimeout(timer);
    if (now || wanted()) {
      timing = true;
      const t0 = performance.now();
      try {
        const res = await fetch(linkURL, { headers: { Accept: 'application/json' } });
        if (res.ok) ({ path } = await res.json());
        rtt = performance.now() - t0;
      } catch { path = ''; }
      timing = false;
      render();
      if (asked) {
        asked = false;
        measure(true);
        return;
      }
    }
    timer = setTimeout(measure, EVERY_MS);
  }
  const ticker = setInterval(render, 1000);
  function render() {
    const fps = updates();
    if (!path) {
      chip.hidden = true;
      open(false);
      return;
    }
    chip.hidden = false;
    const figures = `${paths[path] || path} · ${Math.round(rtt)} ms · ${fps} updates/s`;
    const hint = slowHint(path, rtt);
    chip.title = `${figures}. ${hint || 'How the portal reaches your desktop, the round trip to the portal, and screen updates a second.'}`;
    chip.setAttribute('aria-label', `Connection: ${figures}`);
    chip.dataset.slow = String(Boolean(hint));
    details.textContent = hint ? `${figures}. ${hint}` : figures;
  }
  measure(true);
  return {
    // again times the round trip now (a console that connected again may
    // have taken another path).
    again() { measure(true); },
    close() { clearTimeout(timer); clearInterval(ticker); },
  };
}
