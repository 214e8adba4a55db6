package e2e

// wanWatch is the init script of the WAN bench's console pages. It keeps
// the console's canvas under watch: every animation frame it hashes a
// region (set by __wan.watch, in the desktop's pixels) and counts the
// frames where it changed; a keydown arms a latency measure that the next
// change ends (__wan.lat). The VNC quality the run asks for is put in
// localStorage before the console reads it. Unless the run is for video,
// WebCodecs' VideoDecoder is taken away before noVNC looks for it, so the
// console does not ask for H.264 and gets tiles from the same portal;
// unless it is for WebRTC, RTCPeerConnection is taken away likewise, so
// the H.264 comes over the websocket. For webrtc-element,
// MediaStreamTrackProcessor is taken away too, so the page takes the
// track's frames from a hidden video element, as in browsers without
// it. __wan.wsIn counts the bytes of the
// messages the page's websockets received (the console's own bytes, as
// TestConsole_IdleBytes counts them: no TCP/IP, no pings).
const wanWatch = `(() => {
  const q = %q, video = %t, rtc = %t, processor = %t;
  if (q) localStorage.setItem('corral.vnc.quality', q);
  if (!video) delete window.VideoDecoder;
  if (!rtc) delete window.RTCPeerConnection;
  if (!processor) delete window.MediaStreamTrackProcessor;
  const now = () => performance.now();
  const w = window.__wan = { changes: 0, lat: [], keyAt: 0, region: null, wsIn: 0 };
  const WS = window.WebSocket;
  window.WebSocket = class extends WS {
    constructor(...a) {
      super(...a);
      this.addEventListener('message', (e) => { w.wsIn += typeof e.data === 'string' ? new TextEncoder().encode(e.data).length : (e.data.byteLength ?? e.data.size); });
    }
  };
  document.addEventListener('keydown', () => { w.keyAt = now(); }, true);
  const scratch = document.createElement('canvas');
  const g = scratch.getContext('2d', { willReadFrequently: true });
  function canvas() {
    const s = document.getElementById('screen');
    if (!s) return null;
    const ird = s.querySelector('iron-remote-desktop');
    if (ird) return ird.shadowRoot ? ird.shadowRoot.querySelector('canvas') : null;
    return s.querySelector('canvas');
  }
  w.canvas = canvas;
  let last = 0;
  w.watch = (x, y, width, height) => { w.region = [x, y, width, height]; scratch.width = width; scratch.height = height; last = 0; w.changes = 0; };
  function look() {
    requestAnimationFrame(look); // first: a throw below must not end the watch
    const c = canvas();
    if (c && w.region && c.width > 1 && c.height > 1) {
      const [x, y, width, height] = w.region;
      g.drawImage(c, x, y, width, height, 0, 0, width, height);
      const d = new Uint32Array(g.getImageData(0, 0, width, height).data.buffer);
      let h = 2166136261;
      for (let i = 0; i < d.length; i++) h = Math.imul(h ^ d[i], 16777619);
      if (last !== 0 && h !== last) {
        w.changes++;
        if (w.keyAt) { w.lat.push(now() - w.keyAt); w.keyAt = 0; }
      }
      last = h;
    }
  }
  requestAnimationFrame(look);
})();`

// clientPoint is a JS function mapping a desktop pixel to the page's
// coordinates (the canvas may be scaled by CSS).
const clientPoint = `([x, y]) => {
  const c = window.__wan.canvas(), r = c.getBoundingClientRect();
  return [r.left + x * r.width / c.width, r.top + y * r.height / c.height];
}`
