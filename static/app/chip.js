// The console's connection chip: the relay path the portal takes to the
// desktop (direct, through a peer portal, through the API server), the
// round trip to the portal (a small request timed every few seconds) and
// how many screen updates arrived in the last second, with a short "why
// slow?" hint as its title when a figure is poor.

const EVERY_MS = 5000;
const SLOW_RTT_MS = 150;

const paths = { direct: 'direct', peer: 'via a peer portal', apiserver: 'via the API server' };

// slowHint says why a link may feel slow, or '' when nothing stands out.
export function slowHint(path, rtt) {
  if (rtt > SLOW_RTT_MS) return `Slow: ${Math.round(rtt)} ms to the portal. A wired network, or a portal nearer to you, helps.`;
  if (path === 'apiserver') return 'The desktop is reached through the Kubernetes API server, the slowest path: the portal cannot reach it directly.';
  if (path === 'peer') return 'The desktop is reached through another portal, one hop more than direct.';
  return '';
}

// attachChip keeps chip up to date; linkURL answers the path, updates()
// returns the screen updates counted since the last call.
export function attachChip(chip, linkURL, updates) {
  let timer;
  let path = '';
  let rtt = 0;
  async function measure() {
    const t0 = performance.now();
    try {
      const res = await fetch(linkURL, { headers: { Accept: 'application/json' } });
      if (res.ok) ({ path } = await res.json());
      rtt = performance.now() - t0;
    } catch { path = ''; }
    render();
    timer = setTimeout(measure, EVERY_MS);
  }
  const ticker = setInterval(render, 1000);
  function render() {
    const fps = updates();
    if (!path) { chip.hidden = true; return; }
    chip.hidden = false;
    chip.textContent = `${paths[path] || path} · ${Math.round(rtt)} ms · ${fps} updates/s`;
    const hint = slowHint(path, rtt);
    chip.title = hint || 'How the portal reaches your desktop, the round trip to the portal, and screen updates a second.';
    chip.dataset.slow = String(Boolean(hint));
  }
  measure();
  return { close() { clearTimeout(timer); clearInterval(ticker); } };
}
