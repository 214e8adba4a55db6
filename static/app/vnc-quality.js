// The VNC console's picture choice (views/console_quality.templ): Sharp,
// Fast, or Auto, which picks by the round trip this page measured to the
// portal. The browser remembers the choice (localStorage). noVNC sends it
// to the server as the Tight encoding's JPEG quality and zlib compression
// levels (pseudo-encodings), which TigerVNC's Xvnc applies at once.
const KEY = 'corral.vnc.quality';

// levels are noVNC's qualityLevel and compressionLevel per choice. Sharp
// is a step above noVNC's own default picture (quality 6 is visibly soft
// on photos); Fast spends about half the JPEG bytes on photo-like areas.
// Both keep zlib at 2: the WAN bench measured compression 7 costing Xvnc
// more than twice the CPU per frame for a fifth fewer bytes, so scrolling
// fell from 38 to 14 fps on the 120 ms link (docs/performance.md).
export const levels = {
  sharp: { quality: 8, compression: 2 },
  fast: { quality: 3, compression: 2 },
};

// wanRTT is the round trip above which Auto chooses Fast: past a LAN or a
// same-city VPN, bytes cost more than the server's CPU.
const wanRTT = 30;

// chosen returns the remembered choice (auto when none or unknown).
export function chosen() {
  const v = localStorage.getItem(KEY);
  return v === 'sharp' || v === 'fast' ? v : 'auto';
}

// measuredRTT returns the round trip of the page's /connect request in ms
// (request sent to first byte back, on the page's kept-alive connection:
// one round trip plus the portal's own few ms), or 0 when unknown.
export function measuredRTT() {
  const e = performance.getEntriesByType('resource').filter((r) => r.name.endsWith('/connect')).pop();
  return e && e.responseStart > e.requestStart ? e.responseStart - e.requestStart : 0;
}

// resolve turns a choice into sharp or fast.
export function resolve(choice, rtt) {
  if (choice !== 'auto') return choice;
  return rtt > wanRTT ? 'fast' : 'sharp';
}

// attach applies the choice to rfb now and whenever the select changes.
export function attach(rfb) {
  const select = document.getElementById('vnc-quality');
  const rtt = measuredRTT();
  const apply = () => {
    const level = levels[resolve(chosen(), rtt)];
    rfb.qualityLevel = level.quality;
    rfb.compressionLevel = level.compression;
    rfb.quality = resolve(chosen(), rtt); // for tests and the devtools
  };
  apply();
  if (!select) return () => {};
  const auto = select.querySelector('option[value=auto]');
  auto.textContent = `Auto (${resolve('auto', rtt)}${rtt ? `, ${Math.round(rtt)} ms` : ''})`;
  select.value = chosen();
  select.closest('label').hidden = false;
  const onChange = () => {
    localStorage.setItem(KEY, select.value);
    apply();
  };
  select.addEventListener('change', onChange);
  return () => {
    select.removeEventListener('change', onChange);
    select.closest('label').hidden = true;
  };
}
