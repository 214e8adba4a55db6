// The VNC console's picture choice (views/console_quality.templ): Sharp,
// Fast, Auto, whose tiles follow the round trip this page measured to
// the portal, and WebRTC where the portal offers it. The browser
// remembers the choice (localStorage). noVNC sends it to the portal's
// screen hub as the Tight encoding's JPEG quality and zlib compression
// levels (pseudo-encodings): the quality is the tiles' JPEG, the
// compression level the choice itself, which the hub reads as when to
// send video (rfb/h264_picture.go; its zlib level is its own): Sharp
// never, Auto and WebRTC while much of the screen moves, Fast always.
// Where the video goes is the transport's choice (vnc-webrtc.js): a
// WebRTC track with WebRTC, and with Auto or Fast past a WAN's round
// trip; the console's websocket otherwise.
const KEY = 'corral.vnc.quality';

// levels are noVNC's qualityLevel per resolved choice: Sharp is a step
// above noVNC's own default picture (quality 6 is visibly soft on
// photos); Fast spends about half the JPEG bytes on photo-like areas.
export const levels = {
  sharp: { quality: 8 },
  fast: { quality: 3 },
};

// video is noVNC's compressionLevel per choice, the hub's video rule:
// 0–1 never, 2–6 Auto (noVNC's and TigerVNC's default 2), 7–9 always.
export const video = { sharp: 1, auto: 2, fast: 9, webrtc: 2 };

// wanRTT is the round trip above which Auto chooses Fast: past a LAN or a
// same-city VPN, bytes cost more than the server's CPU.
const wanRTT = 30;

// remeasureMS are when Auto measures the round trip again after its
// first try: a page measured while it loads and the desktop's first frames
// arrive can see a longer trip than the link has; the shortest one wins.
const remeasureMS = [3000, 10000];

// chosen returns the remembered choice (auto when none or unknown, and
// for webrtc where the portal does not offer it: rtc false).
export function chosen(rtc = false) {
  const v = localStorage.getItem(KEY);
  return v === 'sharp' || v === 'fast' || (v === 'webrtc' && rtc) ? v : 'auto';
}

// measureRTT resolves to the round trip to the portal in ms: the fastest
// of three GET /healthz on the page's kept-alive connection (one round
// trip and the portal's few microseconds; /connect is no measure, it waits
// for the desktop's probes), or 0 when they fail.
export async function measureRTT() {
  let best = 0;
  for (let i = 0; i < 3; i++) {
    const t0 = performance.now();
    try {
      await (await fetch('/healthz', { cache: 'no-store' })).arrayBuffer();
    } catch {
      return best;
    }
    const ms = performance.now() - t0;
    if (!best || ms < best) best = ms;
  }
  return best;
}

// resolve turns a choice into sharp or fast (WebRTC's tiles are Auto's).
export function resolve(choice, rtt) {
  if (choice !== 'auto' && choice !== 'webrtc') return choice;
  return rtt > wanRTT ? 'fast' : 'sharp';
}

// wantsRTC reports whether a choice sends the video on a WebRTC track,
// where the portal offers one, at round trip rtt (0: not measured yet):
// WebRTC always; Auto and Fast past a WAN's round trip, where TCP held
// the video back in make bench-wan (at 40 ms and 0.5 % loss the track
// drew 1.7 times the websocket's frames, at 120 ms and 1 % ten times;
// on a LAN the two were alike, and TCP's loss-bound rate, about
// 1.22 * MSS / (RTT * sqrt(loss)), carries the hub's 4 Mbit/s there up
// to several per cent of loss); Sharp never (it sends no video).
export function wantsRTC(choice, rtt) {
  if (choice === 'webrtc') return true;
  return choice !== 'sharp' && rtt > wanRTT;
}

// attach applies the choice to rfb and its WebRTC track (vnc-webrtc.js's
// attachRTC; rtc.offered: the portal offers one) now (Auto starts Sharp
// until the round trip is measured, and follows the shortest trip
// measured since) and whenever the select changes; it returns a
// detach. A viewer beside the holder leaves the desktop's picture to
// the holder: only its transport follows Auto.
export function attach(rfb, rtc, beside = false) {
  const select = beside ? null : document.getElementById('vnc-quality');
  const offered = Boolean(rtc.offered && window.RTCPeerConnection && typeof VideoFrame !== 'undefined');
  let rtt = 0;
  const apply = (retry = false) => {
    const choice = beside ? 'auto' : chosen(offered);
    if (offered) rtc.want(wantsRTC(choice, rtt), retry);
    if (beside) return;
    const name = resolve(choice, rtt);
    rfb.qualityLevel = levels[name].quality;
    rfb.compressionLevel = video[choice];
    rfb.quality = name; // for tests and the devtools
  };
  apply();
  const measure = () => measureRTT().then((ms) => {
    if (rtt && (!ms || ms >= rtt)) return;
    rtt = ms;
    apply();
    // The choice's words stay short enough for the bar (a compact one
    // gives it 6rem); what Auto picked and the round trip are in the title.
    const how = resolve('auto', rtt) + (offered && wantsRTC('auto', rtt) ? ', video over WebRTC' : '');
    if (select && rtt) select.title = `VNC picture: Auto (${how}) follows the network's round trip (${Math.round(rtt)} ms now)`;
  });
  measure();
  const timers = remeasureMS.map((ms) => setTimeout(measure, ms));
  const stop = () => timers.forEach(clearTimeout);
  if (!select) return stop;
  const webrtc = select.querySelector('option[value=webrtc]');
  if (webrtc) webrtc.hidden = webrtc.disabled = !offered;
  select.value = chosen(offered);
  select.closest('label').hidden = false;
  const onChange = () => {
    localStorage.setItem(KEY, select.value);
    apply(select.value === 'webrtc');
  };
  select.addEventListener('change', onChange);
  return () => {
    stop();
    select.removeEventListener('change', onChange);
    select.closest('label').hidden = true;
  };
}
